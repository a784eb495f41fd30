"""The serving path as the cluster reports it, beside what the GitOps repo says.

`read_live` connects with the user's kubeconfig and reads (never writes) what Argo CD and
Argo Rollouts did with the repo's commits (trainops.cluster.argo). `check_promotable` is
what `promote` asks first when it can read the cluster: Argo Rollouts resets a Rollout's
abort whenever its steps change (a new step hash restarts the steps and clears the abort),
so a promote committed over a canary the controller aborted would send traffic back to the
failed canary. The only commit that agrees with an abort is `trainops rollout abort`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from trainops.cluster.access import ClusterAccess
from trainops.errors import GateFailedError, InputError, RemoteError
from trainops.manifest import Manifest
from trainops.rollout.context import serve_context

if TYPE_CHECKING:
    from trainops.cluster.argo import AnalysisState, LiveState

POLL = 1.0  # seconds between reads of the cluster while waiting for the controller


def read_live(manifest: Manifest, access: ClusterAccess | None = None) -> LiveState:
    """The pipeline's Applications, Rollout, HTTPRoute weights and last AnalysisRun, read live."""
    from trainops.cluster.argo import live_state  # lazy: loads ssl
    from trainops.cluster.client import connect  # lazy: loads ssl
    from trainops.rollout.traffic import step_position  # lazy: loads ssl, socketserver

    ctx = serve_context(manifest)
    argocd = manifest.pipeline.spec.gitops.argocd
    with connect(access) as cluster:
        namespace = ctx.namespace or (argocd.destination_namespace if argocd else None) or cluster.namespace
        live = live_state(
            cluster,
            pipeline=ctx.pipeline,
            argocd_namespace=argocd.namespace if argocd else "argocd",
            rollout=ctx.name if ctx.rollout.traffic == "argo-rollouts" else None,
            namespace=namespace,
            route=ctx.name if ctx.rollout.gateway is not None else None,
        )
    if live.rollout is None:
        return live
    step, doing = step_position(ctx, live.rollout.canary_steps, live.rollout.controller_step)
    return replace(live, rollout=replace(live.rollout, step=step, doing=doing))


def analysis_text(analysis: AnalysisState) -> str:
    """`AnalysisRun NAME Failed: metric=value (Failed), …` — the verdict and the values measured."""
    values = ", ".join(f"{m.metric}={m.value or '-'} ({m.phase})" for m in analysis.measurements)
    return f"AnalysisRun {analysis.name} {analysis.phase}" + (f": {values}" if values else "")


def check_promotable(live: LiveState) -> None:
    """GateFailedError when the controller aborted the canary (promoting would undo the abort)."""
    rollout = live.rollout
    if rollout is None or not rollout.aborted:
        return
    why = analysis_text(rollout.analysis) if rollout.analysis is not None else (rollout.message or "aborted")
    raise GateFailedError(
        f"Argo Rollouts aborted the canary of {rollout.namespace}/{rollout.name} ({why}); a promote "
        "would change the Rollout's steps, which clears the abort and sends traffic to the canary again",
        hint="commit the abort with `trainops rollout abort` (all traffic back to stable in git too)",
    )


@dataclass(frozen=True)
class StepVerdict:
    """What the controller concluded about the step a commit asked for."""

    passed: bool
    analysis: AnalysisState | None
    message: str | None


def _verdict(live: LiveState, *, path: str, commit: str) -> StepVerdict | None:
    app = next((a for a in live.applications if a.path == path), None)
    if app is None or app.revision != commit or app.synced_at is None:
        return None  # Argo CD has not synced the commit yet
    rollout = live.rollout
    if rollout is None:
        return None
    run = rollout.analysis if rollout.analysis is not None and rollout.analysis.created >= app.synced_at else None
    if rollout.aborted:
        return StepVerdict(False, run or rollout.analysis, rollout.message)
    if run is None or run.phase in ("Pending", "Running"):
        return None
    return StepVerdict(run.phase == "Successful", run, run.message)


def wait_step_verdict(
    manifest: Manifest,
    *,
    commit: str,
    access: ClusterAccess | None,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
) -> StepVerdict:
    """Wait until Argo CD synced `commit` and the step's AnalysisRun (or an abort) gave a verdict."""
    from trainops.rollout.render import serving_path  # lazy: loads ssl, socketserver

    path = serving_path(manifest)
    deadline = time.monotonic() + timeout
    while True:
        live = read_live(manifest, access)
        if live.missing:
            raise InputError(
                f"promote --auto follows the controllers, but the cluster lacks {'; '.join(live.missing)}",
                hint="install them, or run promote --auto without --cluster/--kubeconfig to measure here",
            )
        verdict = _verdict(live, path=path, commit=commit)
        if verdict is not None:
            return verdict
        if time.monotonic() >= deadline:
            raise RemoteError(
                f"no verdict from the cluster on commit {commit[:12]} after {timeout:.0f}s "
                "(Argo CD has not synced it, or the step's AnalysisRun has not finished)",
                hint="check `trainops rollout status --cluster`",
            )
        sleep(POLL)
