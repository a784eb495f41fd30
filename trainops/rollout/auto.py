"""`rollout promote --auto`: promote step by step while the canary's measurements hold, abort when they do not.

At each step the thresholds of rollout.analysis are measured (trainops.rollout.analysis); when
all hold the next step is committed with the measured values in its message; past the
failure limit the canary is aborted — a commit that returns all traffic to stable, with the
measured values — and GateFailedError says so. Prometheus unreachable or no data: nothing
is committed and the error says why.

With a cluster to read (`cluster`, else the user's kubeconfig when the manifest declares Argo
CD or Argo Rollouts: trainops.rollout.flows.promote_check) and rollout.traffic argo-rollouts,
trainops does not measure twice: each committed step carries the AnalysisTemplate, Argo Rollouts runs it as an
AnalysisRun, and trainops waits for Argo CD to sync the commit and for that run's verdict
(trainops.rollout.live.wait_step_verdict). Successful: the next step is committed with the
values the run measured. Failed: the controller has already aborted (traffic on stable);
trainops commits the abort so that git says the same, and GateFailedError carries the values.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainops.cluster.access import ClusterAccess
from trainops.errors import ExistsError, GateFailedError, InputError
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.serving import Analysis, CanaryStep
from trainops.rollout.analysis import measurements_per_step, run_analysis
from trainops.rollout.context import ServeContext, serve_context
from trainops.rollout.flows import (
    ActionResult,
    abort,
    commit_state,
    next_state,
    promote_check,
    read_state,
)
from trainops.rollout.live import analysis_text, wait_step_verdict
from trainops.rollout.slo_gate import eval_gate, serving_slos, slo_interval
from trainops.rollout.slo_gate import judge as judge_slos
from trainops.rollout.state import RolloutState
from trainops.slo.rules import promql_duration

log = logging.getLogger(__name__)


def step_window(manifest: Manifest, step: CanaryStep) -> float:
    """Seconds of a canary step the SLO gate judges: its pause, else spec.slo.canaryWindow."""
    if isinstance(step.pause, str) and step.pause != "manual":
        return duration_seconds(step.pause)
    return slo_interval(manifest)


VERDICT_SLACK = 120.0  # seconds for Argo CD's poll and sync on top of the analysis itself


def auto_promote(
    manifest: Manifest,
    *,
    cluster: ClusterAccess | None = None,
    max_attempts: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> ActionResult:
    ctx = serve_context(manifest)
    analysis = ctx.rollout.analysis
    slos = bool(serving_slos(manifest))
    if (analysis is None and not slos) or ctx.rollout.canary is None:
        raise InputError(
            "promote --auto moves traffic on measurements: neither rollout.analysis nor spec.slo.serving is declared",
            hint="add spec.slo.serving or rollout.analysis (prometheus, thresholds), or promote by hand",
        )
    read, warnings = promote_check(manifest, cluster)
    if read is not None and ctx.rollout.traffic == "argo-rollouts":
        judge = _controller_judge(manifest, read, analysis=analysis, sleep=sleep)
        return _promote_steps(manifest, ctx, judge, max_attempts=max_attempts)

    def measure(before: RolloutState, commit: str) -> _Verdict:
        assert ctx.rollout.canary is not None and before.step is not None
        step = ctx.rollout.canary.steps[min(before.step, len(ctx.rollout.canary.steps) - 1)]
        lines: list[str] = []
        if analysis is not None:
            outcome = run_analysis(analysis, count=measurements_per_step(analysis, step), sleep=sleep)
            lines = outcome.lines()
            if not outcome.passed:
                bad = next(m for m in reversed(outcome.measurements) if not m.ok)
                why = f"analysis failed: {bad.metric} past failureLimit {analysis.failure_limit}"
                return _Verdict(lines, why, bad.text())
        if slos and before.step == 0 and before.canary is not None:
            gate = eval_gate(manifest, before.canary.release)
            lines.append(f"analysis: {gate.text}")
            log.warning("%s", gate.text)
            if not gate.ok:
                return _Verdict(lines, f"the eval gate of release {gate.release} fails", gate.text)
        if slos:
            window = step_window(manifest, step)
            if analysis is None:
                log.warning("slo: judging the canary over the step's %s", promql_duration(window))
                sleep(window)  # the step's traffic, then its verdict
            judged = judge_slos(manifest, window_seconds=window)
            lines += [f"analysis: {j.text()}" for j in judged]
            for j in judged:
                log.warning("%s", j.text())
            bad_slo = next((j for j in judged if not j.ok), None)
            if bad_slo is not None:
                return _Verdict(lines, f"slo {bad_slo.slo} burns its error budget", bad_slo.text())
        return _Verdict(lines)

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
    manifest: Manifest, cluster: ClusterAccess, *, analysis: Analysis | None, sleep: Callable[[float], None]
) -> Callable[[RolloutState, str], _Verdict]:
    """promote --auto under Argo Rollouts: each committed step's AnalysisRun verdict, once Argo
    CD has synced the commit (the controller has already aborted a failed canary)."""

    interval = duration_seconds(analysis.interval) if analysis is not None else slo_interval(manifest)
    count = ((analysis.count or 1) + analysis.failure_limit) if analysis is not None else 2
    timeout = VERDICT_SLACK + interval * count

    def judge(before: RolloutState, commit: str) -> _Verdict:
        verdict = wait_step_verdict(manifest, commit=commit, access=cluster, timeout=timeout, sleep=sleep)
        text = analysis_text(verdict.analysis) if verdict.analysis is not None else None
        lines = [f"analysis: {text}"] if text is not None else []
        if verdict.passed:
            return _Verdict(lines)
        failed = f"Argo Rollouts aborted the canary: {verdict.message or 'analysis failed'}"
        return _Verdict(lines, failed, text or verdict.message or "analysis failed")

    return judge
