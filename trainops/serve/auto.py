"""`rollout promote --auto`: promote step by step while the canary's measurements hold, abort when they do not.

At each step the thresholds of rollout.analysis are measured (trainops.serve.analysis); when
all hold the next step is committed with the measured values in its message; past the
failure limit the canary is aborted — a commit that returns all traffic to stable, with the
measured values — and GateFailedError says so. Prometheus unreachable or no data: nothing
is committed and the error says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainops.errors import ExistsError, GateFailedError, InputError
from trainops.serve.analysis import measurements_per_step, run_analysis
from trainops.serve.context import serve_context
from trainops.serve.flows import ActionResult, abort, commit_state, next_state, read_state
from trainops.spec import Manifest


def auto_promote(
    manifest: Manifest, *, max_attempts: int = 5, sleep: Callable[[float], None] = time.sleep
) -> ActionResult:
    ctx = serve_context(manifest)
    analysis = ctx.rollout.analysis
    if analysis is None or ctx.rollout.canary is None:
        raise InputError(
            "promote --auto moves traffic on measurements: rollout.analysis has no thresholds",
            hint="add rollout.analysis (prometheus, thresholds), or promote by hand",
        )
    last: ActionResult | None = None
    measured: list[str] = []
    while True:
        before, _ = read_state(manifest)
        if before.canary is None or before.step is None:
            if last is None:
                raise ExistsError("no canary is under way: nothing to promote", hint="start one first")
            return last
        step = ctx.rollout.canary.steps[min(before.step, len(ctx.rollout.canary.steps) - 1)]
        outcome = run_analysis(analysis, count=measurements_per_step(analysis, step), sleep=sleep)
        lines = outcome.lines()
        if not outcome.passed:
            bad = next(m for m in reversed(outcome.measurements) if not m.ok)
            reason = [*lines, f"analysis failed: {bad.metric} past failureLimit {analysis.failure_limit}"]
            aborted = abort(manifest, reason=reason, max_attempts=max_attempts)
            where = f"aborted in commit {aborted.commit[:12]}" if aborted.commit else "nothing committed (stale)"
            stable = aborted.after.stable.version if aborted.after.stable else "none"
            raise GateFailedError(
                f"canary {before.canary.version} failed analysis at {before.step + 1}: {bad.text()}; "
                f"{where}: all traffic back to stable {stable}",
                hint="look at the engine's metrics; start again with a fixed release",
            )
        measured += lines
        after = next_state(ctx, before, full=False)
        last = commit_state(
            manifest, ctx, action="promote-auto", before=before, after=after, body=lines, max_attempts=max_attempts
        )
        last = ActionResult(**{**last.__dict__, "analysis": list(measured)})
        if last.stale:
            return last
