"""The serving path as the cluster reports it, beside what the GitOps repo says.

`read_live` connects with the user's kubeconfig and reads (never writes) what Argo CD and
Argo Rollouts did with the repo's commits (trainops.cluster.argo). `check_promotable` is
what `promote` asks first when it can read the cluster: Argo Rollouts resets a Rollout's
abort whenever its steps change (a new step hash restarts the steps and clears the abort),
so a promote committed over a canary the controller aborted would send traffic back to the
failed canary. The only commit that agrees with an abort is `trainops rollout abort`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.errors import GateFailedError
from trainops.serve.context import serve_context
from trainops.spec import Manifest

if TYPE_CHECKING:
    from trainops.cluster.argo import AnalysisState, LiveState


def read_live(manifest: Manifest, *, kubeconfig: str | None = None, context: str | None = None) -> LiveState:
    """The pipeline's Applications, Rollout, HTTPRoute weights and last AnalysisRun, read live."""
    from trainops.cluster.argo import live_state
    from trainops.cluster.client import connect

    ctx = serve_context(manifest)
    argocd = manifest.pipeline.spec.gitops.argocd
    with connect(kubeconfig=kubeconfig, context=context) as cluster:
        namespace = ctx.namespace or (argocd.destination_namespace if argocd else None) or cluster.namespace
        return live_state(
            cluster,
            pipeline=ctx.pipeline,
            argocd_namespace=argocd.namespace if argocd else "argocd",
            rollout=ctx.name if ctx.rollout.traffic == "argo-rollouts" else None,
            namespace=namespace,
            route=ctx.name if ctx.rollout.gateway is not None else None,
        )


def analysis_text(analysis: AnalysisState) -> str:
    """`AnalysisRun NAME Failed: metric=value (Failed), …` — the verdict and the values measured."""
    values = ", ".join(f"{m.metric}={m.value if m.value is not None else '-'} ({m.phase})" for m in analysis.measurements)
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
