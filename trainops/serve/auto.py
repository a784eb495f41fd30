"""`rollout promote --auto`: promote step by step while the canary's measurements hold, abort when they do not.

At each step the thresholds of rollout.analysis are measured (trainops.serve.analysis); when
all hold the next step is committed with the measured values in its message; past the
failure limit the canary is aborted — a commit that returns all traffic to stable, with the
measured values — and GateFailedError says so. Prometheus unreachable or no data: nothing
is committed and the error says why.

With a cluster to read (`cluster`, else the user's kubeconfig when the manifest declares Argo
CD or Argo Rollouts: trainops.serve.flows.promote_check) and rollout.traffic argo-rollouts,
trainops does not measure twice: each committed step carries the AnalysisTemplate, Argo Rollouts runs it as an
AnalysisRun, and trainops waits for Argo CD to sync the commit and for that run's verdict
(trainops.serve.live.wait_step_verdict). Successful: the next step is committed with the
values the run measured. Failed: the controller has already aborted (traffic on stable);
trainops commits the abort so that git says the same, and GateFailedError carries the values.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trainops.errors import ExistsError, GateFailedError, InputError
from trainops.serve.analysis import measurements_per_step, run_analysis
from trainops.serve.context import ServeContext, serve_context
from trainops.serve.flows import (
    ActionResult,
    ClusterRead,
    abort,
    commit_state,
    next_state,
    promote_check,
    read_state,
)
from trainops.serve.state import RolloutState
from trainops.spec import Manifest
from trainops.spec.common import duration_seconds
from trainops.spec.serving import Analysis

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
    read, warnings = promote_check(manifest, cluster)
    if read is not None and ctx.rollout.traffic == "argo-rollouts":
        judge = _controller_judge(manifest, read, analysis=analysis, sleep=sleep)
        return _promote_steps(manifest, ctx, judge, max_attempts=max_attempts)

    def measure(before: RolloutState, commit: str) -> _Verdict:
        assert analysis is not None and ctx.rollout.canary is not None and before.step is not None
        step = ctx.rollout.canary.steps[min(before.step, len(ctx.rollout.canary.steps) - 1)]
        outcome = run_analysis(analysis, count=measurements_per_step(analysis, step), sleep=sleep)
        lines = outcome.lines()
        if outcome.passed:
            return _Verdict(lines)
        bad = next(m for m in reversed(outcome.measurements) if not m.ok)
        return _Verdict(lines, f"analysis failed: {bad.metric} past failureLimit {analysis.failure_limit}", bad.text())

    result = _promote_steps(manifest, ctx, measure, max_attempts=max_attempts)
    result.warnings[:0] = warnings
    return result


@dataclass(frozen=True)
class _Verdict:
    """What one step's analysis said: its lines for the commit message, and on failure the
    reason the abort commit gives and the measurement the error names."""

    lines: list[str]
    failed: str | None = None
    why: str = ""


def _promote_steps(
    manifest: Manifest, ctx: ServeContext, judge: Callable[[RolloutState, str], _Verdict], *, max_attempts: int
) -> ActionResult:
    """Judge each step of the canary under way; commit the next one while it passes, abort
    (GateFailedError) when it does not; the last commit's result once no canary is left."""
    last: ActionResult | None = None
    measured: list[str] = []
    while True:
        before, commit = read_state(manifest)
        if before.canary is None or before.step is None or commit is None:
            if last is None:
                raise ExistsError("no canary is under way: nothing to promote", hint="start one first")
            return last
        verdict = judge(before, commit)
        if verdict.failed is not None:
            aborted = abort(manifest, reason=[*verdict.lines, verdict.failed], max_attempts=max_attempts)
            where = f"aborted in commit {aborted.commit[:12]}" if aborted.commit else "nothing committed (stale)"
            stable = aborted.after.stable.version if aborted.after.stable else "none"
            raise GateFailedError(
                f"canary {before.canary.version} failed analysis at step {before.step + 1}: {verdict.why}; "
                f"{where}: all traffic back to stable {stable}",
                hint="look at the engine's metrics; start again with a fixed release",
            )
        measured += verdict.lines
        after = next_state(ctx, before, full=False)
        last = commit_state(
            manifest, ctx, action="promote-auto", before=before, after=after, body=verdict.lines,
            max_attempts=max_attempts,
        )  # fmt: skip
        last = ActionResult(**{**last.__dict__, "analysis": list(measured)})
        if last.stale:
            return last


def _controller_judge(
    manifest: Manifest, cluster: ClusterRead, *, analysis: Analysis, sleep: Callable[[float], None]
) -> Callable[[RolloutState, str], _Verdict]:
    """promote --auto under Argo Rollouts: each committed step's AnalysisRun verdict, once Argo
    CD has synced the commit (the controller has already aborted a failed canary)."""
    from trainops.serve.live import analysis_text, wait_step_verdict

    timeout = VERDICT_SLACK + duration_seconds(analysis.interval) * ((analysis.count or 1) + analysis.failure_limit)

    def judge(before: RolloutState, commit: str) -> _Verdict:
        verdict = wait_step_verdict(manifest, commit=commit, kubeconfig=cluster.kubeconfig,
                                    context=cluster.context, timeout=timeout, sleep=sleep)  # fmt: skip
        text = analysis_text(verdict.analysis) if verdict.analysis is not None else None
        lines = [f"analysis: {text}"] if text is not None else []
        if verdict.passed:
            return _Verdict(lines)
        failed = f"Argo Rollouts aborted the canary: {verdict.message or 'analysis failed'}"
        return _Verdict(lines, failed, text or verdict.message or "analysis failed")

    return judge
