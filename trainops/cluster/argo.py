"""What Argo CD and Argo Rollouts report about a pipeline's serving, read from the API server.

Reads only (trainops writes through git): the Argo CD Applications of the pipeline (sync and
health, the revision synced, the last operation's message), the Rollout (phase, step,
abort, the controller's message, its ReplicaSets), the weights actually on the HTTPRoute,
and the newest AnalysisRun of the Rollout (verdict, each metric's last measured values).

A cluster that does not serve Argo CD's Application or Argo Rollouts' Rollout kind is not an
error: `LiveState.missing` names what is not installed and the rest is still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainops.cluster.client import Cluster
from trainops.serialize import HIDDEN

ARGO_API = "argoproj.io/v1alpha1"
ROUTE_API = "gateway.networking.k8s.io/v1"
LABEL_PIPELINE = "trainops.dev/pipeline"
LABEL_HASH = "rollouts-pod-template-hash"
MISSING_ARGOCD = "Argo CD (the cluster does not serve argoproj.io/v1alpha1 Application)"
MISSING_ROLLOUTS = "Argo Rollouts (the cluster does not serve argoproj.io/v1alpha1 Rollout)"
STUCK_REASON = "ProgressDeadlineExceeded"


@dataclass(frozen=True)
class ApplicationState:
    name: str
    namespace: str
    path: str
    sync: str  # Synced, OutOfSync, Unknown
    health: str  # Healthy, Progressing, Suspended, Degraded, Missing, Unknown
    revision: str | None  # the commit Argo CD synced last
    message: str | None  # the last operation's message, or a condition's
    synced_at: str | None = None  # when the last sync operation finished (RFC 3339)


@dataclass(frozen=True)
class ReplicaSetState:
    name: str
    role: str  # stable, canary, old
    pod_template_hash: str
    replicas: int  # desired
    ready: int


@dataclass(frozen=True)
class RouteWeight:
    service: str
    weight: int


@dataclass(frozen=True)
class Measurement:
    metric: str
    phase: str  # Successful, Failed, Error, Inconclusive, Running
    value: str | None
    message: str | None = None


@dataclass(frozen=True)
class AnalysisState:
    name: str
    phase: str  # Pending, Running, Successful, Failed, Error, Inconclusive
    message: str | None
    measurements: list[Measurement] = field(default_factory=list)  # the last of each metric
    created: str = ""  # RFC 3339


@dataclass(frozen=True)
class RolloutLive:
    name: str
    namespace: str
    phase: str  # Healthy, Progressing, Paused, Degraded
    message: str | None
    controller_step: int | None  # status.currentStepIndex: an index into the Rollout's own steps
    controller_steps: int  # how many steps the Rollout has (those of the commit synced)
    aborted: bool
    paused: bool
    stuck: bool  # the Progressing condition says the deadline passed
    replica_sets: list[ReplicaSetState] = field(default_factory=list)
    route: str | None = None
    weights: list[RouteWeight] = field(default_factory=list)  # the HTTPRoute's weighted rule, read live
    header_routes: list[str] = field(default_factory=list)  # named rules matching headers
    analysis: AnalysisState | None = None
    # the step in trainops' terms ("2/3 50%") and what the controller does in it, mapped from
    # controller_step over canary_steps by trainops.rollout.live.read_live
    step: str | None = None
    doing: str | None = None
    canary_steps: list[dict[str, Any]] = field(default_factory=list, metadata=HIDDEN)  # spec.strategy.canary.steps


@dataclass(frozen=True)
class LiveState:
    server: str
    applications: list[ApplicationState] = field(default_factory=list)
    rollout: RolloutLive | None = None
    missing: list[str] = field(default_factory=list)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int) else 0


def application_state(app: dict[str, Any]) -> ApplicationState:
    meta, spec, status = app.get("metadata", {}), app.get("spec", {}), app.get("status") or {}
    sync = status.get("sync") or {}
    health = status.get("health") or {}
    operation = status.get("operationState") or {}
    message = operation.get("message") if operation.get("phase") not in (None, "Succeeded") else None
    for condition in status.get("conditions") or []:
        message = message or condition.get("message")
    return ApplicationState(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        path=str((spec.get("source") or {}).get("path", "")),
        sync=str(sync.get("status") or "Unknown"),
        health=str(health.get("status") or "Unknown"),
        revision=sync.get("revision"),
        message=message or health.get("message"),
        synced_at=operation.get("finishedAt"),
    )


def applications(cluster: Cluster, *, pipeline: str, namespace: str) -> list[ApplicationState]:
    """The pipeline's Applications (label trainops.dev/pipeline), by name."""
    items = cluster.list(ARGO_API, "Application", namespace=namespace, selector=f"{LABEL_PIPELINE}={pipeline}")
    return sorted((application_state(item) for item in items), key=lambda a: a.name)


def _route_weights(route: dict[str, Any], stable: str, canary: str) -> tuple[list[RouteWeight], list[str]]:
    weights: list[RouteWeight] = []
    headers: list[str] = []
    for rule in (route.get("spec") or {}).get("rules") or []:
        refs = rule.get("backendRefs") or []
        names = {ref.get("name") for ref in refs}
        if any(m.get("headers") for m in rule.get("matches") or []):
            headers.append(str(rule.get("name") or "(unnamed)"))
        elif {stable, canary} <= names and not weights:
            weights = [RouteWeight(str(ref.get("name")), _int(ref.get("weight", 1))) for ref in refs]
    return weights, headers


def _owned_by_rollout(obj: dict[str, Any], name: str) -> bool:
    owners = obj["metadata"].get("ownerReferences") or []
    return any(ref.get("kind") == "Rollout" and ref.get("name") == name for ref in owners)


def _analysis(cluster: Cluster, rollout: dict[str, Any], namespace: str) -> AnalysisState | None:
    name = rollout["metadata"]["name"]
    runs = [run for run in cluster.list(ARGO_API, "AnalysisRun", namespace=namespace) if _owned_by_rollout(run, name)]
    if not runs:
        return None
    run = max(runs, key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]))
    status = run.get("status") or {}
    measured = []
    for result in status.get("metricResults") or []:
        last = (result.get("measurements") or [{}])[-1]
        measured.append(
            Measurement(
                metric=str(result.get("name", "")),
                phase=str(result.get("phase") or last.get("phase") or "Pending"),
                value=last.get("value"),
                message=result.get("message") or last.get("message"),
            )
        )
    return AnalysisState(
        name=run["metadata"]["name"],
        phase=str(status.get("phase") or "Pending"),
        message=status.get("message"),
        measurements=measured,
        created=str(run["metadata"].get("creationTimestamp", "")),
    )


def _replica_sets(cluster: Cluster, rollout: dict[str, Any], namespace: str) -> list[ReplicaSetState]:
    name, status = rollout["metadata"]["name"], rollout.get("status") or {}
    stable, current = status.get("stableRS"), status.get("currentPodHash")
    out = []
    for rs in cluster.list("apps/v1", "ReplicaSet", namespace=namespace):
        if not _owned_by_rollout(rs, name):
            continue
        pod_hash = str(rs["metadata"].get("labels", {}).get(LABEL_HASH, ""))
        role = "stable" if pod_hash == stable else "canary" if pod_hash == current else "old"
        rs_status = rs.get("status") or {}
        out.append(ReplicaSetState(rs["metadata"]["name"], role, pod_hash, _int((rs.get("spec") or {}).get("replicas")),
                                   _int(rs_status.get("readyReplicas"))))  # fmt: skip
    order = {"stable": 0, "canary": 1, "old": 2}
    return sorted(out, key=lambda r: (order[r.role], r.name))


def rollout_live(cluster: Cluster, *, name: str, namespace: str, route: str | None) -> RolloutLive | None:
    """The Rollout `name` as its controller reports it (None: not in the cluster)."""
    rollout = cluster.get(ARGO_API, "Rollout", name, namespace=namespace)
    if rollout is None:
        return None
    spec, status = rollout.get("spec") or {}, rollout.get("status") or {}
    canary = (spec.get("strategy") or {}).get("canary") or {}
    stuck, message = False, status.get("message")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing" and condition.get("reason") == STUCK_REASON:
            stuck, message = True, condition.get("message") or message
    weights: list[RouteWeight] = []
    headers: list[str] = []
    if route is not None and cluster.served(ROUTE_API, "HTTPRoute"):
        obj = cluster.get(ROUTE_API, "HTTPRoute", route, namespace=namespace)
        if obj is not None:
            weights, headers = _route_weights(obj, str(canary.get("stableService")), str(canary.get("canaryService")))
    step = status.get("currentStepIndex")
    return RolloutLive(
        name=name,
        namespace=namespace,
        phase=str(status.get("phase") or "Unknown"),
        message=message,
        controller_step=step if isinstance(step, int) else None,
        controller_steps=len(canary.get("steps") or []),
        aborted=bool(status.get("abort")),
        paused=bool(status.get("pauseConditions")) or bool(spec.get("paused")),
        stuck=stuck,
        replica_sets=_replica_sets(cluster, rollout, namespace),
        route=route,
        weights=weights,
        header_routes=headers,
        analysis=_analysis(cluster, rollout, namespace),
        canary_steps=[s for s in canary.get("steps") or [] if isinstance(s, dict)],
    )


def live_state(
    cluster: Cluster, *, pipeline: str, argocd_namespace: str, rollout: str | None, namespace: str, route: str | None
) -> LiveState:
    """Everything the cluster says about the pipeline's GitOps paths and its Rollout."""
    missing: list[str] = []
    apps: list[ApplicationState] = []
    if cluster.served(ARGO_API, "Application"):
        apps = applications(cluster, pipeline=pipeline, namespace=argocd_namespace)
    else:
        missing.append(MISSING_ARGOCD)
    live: RolloutLive | None = None
    if rollout is not None:
        if cluster.served(ARGO_API, "Rollout"):
            live = rollout_live(cluster, name=rollout, namespace=namespace, route=route)
        else:
            missing.append(MISSING_ROLLOUTS)
    return LiveState(server=cluster.server, applications=apps, rollout=live, missing=missing)
