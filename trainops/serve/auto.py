"""`rollout promote --auto`: promote step by step while the canary's measurements hold, abort when they do not.

At each step the thresholds of rollout.analysis are measured (trainops.serve.analysis); when
all hold the next step is committed with the measured values in its message; past the
failure limit the canary is aborted — a commit that returns all traffic to stable, with the
measured values — and GateFailedError says so. Prometheus unreachable or no data: nothing
is committed and the error says why.

With a cluster to read (`cluster`) and rollout.traffic argo-rollouts, trainops does not measure
twice: each committed step carries the AnalysisTemplate, Argo Rollouts runs it as an
AnalysisRun, and trainops waits for Argo CD to sync the commit and for that run's verdict
(trainops.serve.live.wait_step_verdict). Successful: the next step is committed with the
values the run measured. Failed: the controller has already aborted (traffic on stable);
trainops commits the abort so that git says the same, and GateFailedError carries the values.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trainops.errors import ExistsError, GateFailedError, InputError
from trainops.serve.analysis import measurements_per_step, run_analysis
from trainops.serve.context import serve_context
from trainops.serve.flows import ActionResult, ClusterRead, abort, commit_state, next_state, read_state
from trainops.spec import Manifest
from trainops.spec.common import duration_seconds

VERDICT_SLACK = 120.0  # seconds for Argo CD's poll and sync on top of the analysis itself


def auto_promote(
    manifest: Manifest,
    *,
    cluster: ClusterRead | None = None,
    max_attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> ActionResult:
    ctx = serve_context(manifest)
    analysis = ctx.rollout.analysis
    if analysis is None or ctx.rollout.canary is None:
        raise InputError(
            "promote --auto moves traffic on measurements: rollout.analysis has no thresholds",
            hint="add rollout.analysis (prometheus, thresholds), or promote by hand",
        )
    if cluster is not None and ctx.rollout.traffic == "argo-rollouts":
        return _follow_controller(manifest, cluster, max_attempts=max_attempts, sleep=sleep)
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


def _follow_controller(
    manifest: Manifest, cluster: ClusterRead, *, max_attempts: int, sleep: Callable[[float], None]
) -> ActionResult:
    """promote --auto under Argo Rollouts: commit the next step on each Successful AnalysisRun."""
    from trainops.serve.live import analysis_text, wait_step_verdict

    ctx = serve_context(manifest)
    analysis = ctx.rollout.analysis
    assert analysis is not None
    timeout = VERDICT_SLACK + duration_seconds(analysis.interval) * ((analysis.count or 1) + analysis.failure_limit)
    last: ActionResult | None = None
    measured: list[str] = []
    while True:
        before, commit = read_state(manifest)
        if before.canary is None or before.step is None or commit is None:
            if last is None:
                raise ExistsError("no canary is under way: nothing to promote", hint="start one first")
            return last
        verdict = wait_step_verdict(manifest, commit=commit, kubeconfig=cluster.kubeconfig,
                                    context=cluster.context, timeout=timeout, sleep=sleep)  # fmt: skip
        lines = [f"analysis: {analysis_text(verdict.analysis)}"] if verdict.analysis is not None else []
        if not verdict.passed:
            reason = [*lines, f"Argo Rollouts aborted the canary: {verdict.message or 'analysis failed'}"]
            aborted = abort(manifest, reason=reason, max_attempts=max_attempts)
            where = f"abort committed in {aborted.commit[:12]}" if aborted.commit else "nothing committed (stale)"
            raise GateFailedError(
                f"canary {before.canary.version} failed analysis at step {before.step + 1}: "
                f"{lines[0].removeprefix('analysis: ') if lines else verdict.message}; {where}",
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
