"""Kubernetes training runs read from the API server: phase, pods, nodes, restarts, and why.

A run's objects carry the label `trainops.dev/run-id` (every pod template too), so a run is
found by label in train.namespace (else the kubeconfig context's namespace), whatever its
scheduler. A TrainJob's pods are its JobSet's: they carry the labels of the runtime's pod
template (trainops' own runtime, or the RuntimePatch on the cluster's). The scheduler's
reason comes from its own objects: the Volcano PodGroup of the
job (conditions such as Unschedulable, with the gang's message), or the Kueue Workload
(QuotaReserved/Admitted false with Kueue's message — no quota, no flavor —, Evicted,
Preempted); for a Kueue job without a Workload, the queue or priority class it names that
the cluster lacks (Kueue only logs that). `finished` says
whether the job is done, from the job's status alone (what `trainops run --executor
cluster` waits on).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import Cluster, connect
from trainops.errors import NotFoundError, RemoteError, TrainopsError
from trainops.manifest import Manifest
from trainops.manifest.stages import TrainSpec
from trainops.render.kueue import QUEUE_LABEL
from trainops.render.names import LABEL_PIPELINE, LABEL_RUN_ID

log = logging.getLogger(__name__)

WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
LOCAL_QUEUE = ("kueue.x-k8s.io/v1beta2", "LocalQueue")
WORKLOAD_PRIORITY = ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass")
WORKLOAD_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")
# Kubernetes' own gang scheduling (the Workload API, 1.37)
GANG_WORKLOAD = ("scheduling.k8s.io/v1beta1", "Workload")
GANG_PODGROUP = ("scheduling.k8s.io/v1beta1", "PodGroup")
COMPONENT = "app.kubernetes.io/component"
JOB_NAME = "batch.kubernetes.io/job-name"
DONE = frozenset({"Completed", "Succeeded", "Failed", "Aborted", "Terminated"})
FAILED = frozenset({"Failed", "Aborted", "Terminated"})


@dataclass(frozen=True)
class PodState:
    name: str
    phase: str
    node: str | None
    restarts: int
    reason: str | None  # a waiting or terminated container's reason (CrashLoopBackOff, OOMKilled, …)


@dataclass(frozen=True)
class RunState:
    """One Kubernetes training run as the API server sees it now."""

    run_id: str
    kind: str  # the job's apiVersion kind
    namespace: str
    name: str
    phase: str  # Pending, Running, Suspended, Completed, Failed, … (the job's own vocabulary)
    reason: str | None  # the scheduler's (PodGroup, Workload) or the job's last condition
    restarts: int  # the job's retries plus its containers' restarts
    created: str | None
    pods: list[PodState] = field(default_factory=list)
    blocked: str | None = None  # with one run asked for: its open unschedulable incident (`train watch` records it)

    @property
    def finished(self) -> bool:
        return self.phase in DONE

    @property
    def failed(self) -> bool:
        return self.phase in FAILED


def job_kind(train: TrainSpec) -> tuple[str, str]:
    """The apiVersion and kind of the training job of train.scheduler."""
    if train.scheduler == "volcano":
        return "batch.volcano.sh/v1alpha1", "Job"
    if train.scheduler == "pytorchjob":
        return "kubeflow.org/v1", "PyTorchJob"
    if train.scheduler == "ray":
        return "ray.io/v1", "RayJob"
    if train.scheduler == "kubeflow":
        return "trainer.kubeflow.org/v1alpha1", "TrainJob"
    if train.scheduler == "kubernetes":
        return "batch/v1", "Job"
    if train.scheduler == "kueue":
        if train.kueue is not None and train.kueue.workload == "job":
            return "batch/v1", "Job"
        return "jobset.x-k8s.io/v1alpha2", "JobSet"
    raise NotFoundError(f"train.scheduler {train.scheduler} runs no Kubernetes job")


def job_kinds(train: TrainSpec) -> list[tuple[str, str]]:
    """The job's apiVersion and kind, then those of the run's objects named like it that go and
    come back with it (a restart through git waits until all are gone): trainops' own
    TrainingRuntime of a TrainJob; a RayJob's submitter Job, which KubeRay names after the
    RayJob (a RayJob recreated while the garbage collector still holds the old one takes it
    for its own, creates none, and never submits: tests/kube/test_ray_watch.py); the Workload and
    PodGroup of a kubernetes gang."""
    kinds = [job_kind(train)]
    if train.scheduler == "kubeflow" and (train.kubeflow is None or not train.kubeflow.runtime):
        kinds.append(("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"))
    if train.scheduler == "ray":
        kinds.append(("batch/v1", "Job"))
    if train.scheduler == "kubernetes":
        kinds += [GANG_WORKLOAD, GANG_PODGROUP]
    return kinds


def required_kinds(train: TrainSpec) -> list[tuple[str, str]]:
    """What the cluster must serve to run the training job: its kind, and for the kubernetes
    scheduler the Workload API's kinds (behind a feature gate in 1.37)."""
    kinds = [job_kind(train)]
    if train.scheduler == "kubernetes":
        kinds += [GANG_WORKLOAD, GANG_PODGROUP]
    return kinds


def _conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found = (obj.get("status") or {}).get("conditions") or []
    return [c for c in found if isinstance(c, dict)]


def _true(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == kind and c.get("status") == "True"), None)


def job_phase(obj: dict[str, Any]) -> str:
    """The phase of a Volcano Job, batch Job, JobSet, TrainJob, PyTorchJob or RayJob from its status."""
    status = obj.get("status") or {}
    kind = obj.get("kind")
    if str(obj.get("apiVersion", "")).startswith("batch.volcano.sh/"):
        return str((status.get("state") or {}).get("phase") or "Pending")
    if kind == "RayJob":
        return _ray_phase(status)
    if kind == "PyTorchJob":
        true = [c for c in _conditions(obj) if c.get("status") == "True"]
        last = str(true[-1].get("type")) if true else "Pending"
        return "Pending" if last == "Created" else last
    for kind_, phase in (("Complete", "Completed"), ("Completed", "Completed"), ("Failed", "Failed")):
        if _true(obj, kind_):
            return phase
    if _true(obj, "Suspended") or (obj.get("spec") or {}).get("suspend"):
        return "Suspended"
    active = status.get("active")
    if isinstance(active, int) and active > 0:
        return "Running"
    jobs = status.get("replicatedJobsStatus") or status.get("jobsStatus") or []  # JobSet's, TrainJob's
    return "Running" if any(j.get("active") or j.get("ready") for j in jobs if isinstance(j, dict)) else "Pending"


# KubeRay's jobDeploymentStatus (the RayJob's own lifecycle) in the jobs' vocabulary; Complete
# is read with the Ray job's status (SUCCEEDED, or FAILED/STOPPED when the driver failed)
_RAY_DEPLOYMENT = {
    "Running": "Running",
    "Suspended": "Suspended",
    "Suspending": "Suspended",
    "Failed": "Failed",
    "ValidationFailed": "Failed",
}


def _ray_phase(status: dict[str, Any]) -> str:
    deployment = str(status.get("jobDeploymentStatus") or "")
    if deployment == "Complete":
        return "Completed" if status.get("jobStatus") in (None, "", "SUCCEEDED") else "Failed"
    return _RAY_DEPLOYMENT.get(deployment, "Pending")  # New, Initializing, Retrying, Waiting


def _status_reason(job: dict[str, Any]) -> str | None:
    """A job that says why in status.reason and status.message (a RayJob) rather than conditions."""
    status = job.get("status") or {}
    if not status.get("reason"):
        return None
    words = " ".join(str(status.get("message") or "").split())
    return f"{status['reason']}: {words}" if words else str(status["reason"])


def _pod_state(pod: dict[str, Any]) -> PodState:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    reason = None
    for c in containers:
        state = c.get("state") or {}
        detail = state.get("waiting") or state.get("terminated") or {}
        if detail.get("reason") and detail.get("reason") not in ("Completed", "ContainerCreating"):
            reason = str(detail["reason"])
    return PodState(
        name=str(pod["metadata"]["name"]),
        phase=str(status.get("phase") or "Pending"),
        node=(pod.get("spec") or {}).get("nodeName"),
        restarts=restarts,
        reason=reason or status.get("reason"),
    )


def _owned(items: list[dict[str, Any]], uid: str) -> list[dict[str, Any]]:
    return [
        i for i in items if any(o.get("uid") == uid for o in (i.get("metadata") or {}).get("ownerReferences") or [])
    ]


def _condition_text(cond: dict[str, Any]) -> str:
    words = " ".join(str(cond.get("message") or "").split())
    return f"{cond.get('type')}: {cond.get('reason') or ''}{': ' if words else ''}{words}".replace(": :", ":")


def scheduler_reason(cluster: Cluster, job: dict[str, Any]) -> str | None:
    """Why the scheduler holds (or held) the job: its PodGroup's or Workload's conditions."""
    meta = job["metadata"]
    namespace, uid = meta.get("namespace"), meta.get("uid")
    gang = _gang_group(job)
    if gang is not None:
        return _gang_reason(cluster, job, gang)
    if str(job.get("apiVersion", "")).startswith("batch.volcano.sh/") and cluster.served(*PODGROUP):
        for group in _owned(cluster.list(*PODGROUP, namespace=namespace), uid):
            phase = (group.get("status") or {}).get("phase")
            held = [c for c in _conditions(group) if c.get("type") == "Unschedulable" and c.get("status") == "True"]
            if held:
                return f"PodGroup {group['metadata']['name']} {phase or ''}: {_condition_text(held[-1])}"
            if phase in ("Pending", "Inqueue"):
                said = _podgroup_event(cluster, group)
                if said:
                    return said
    if cluster.served(*WORKLOAD):
        workloads = _owned(cluster.list(*WORKLOAD, namespace=namespace), uid)
        if not workloads and QUEUE_LABEL in (meta.get("labels") or {}):
            return _no_workload(cluster, job)
        for workload in workloads:
            for kind in ("Evicted", "Preempted"):
                cond = _true(workload, kind)
                if cond:
                    return f"Workload {workload['metadata']['name']} {_condition_text(cond)}"
            if not _true(workload, "Admitted"):
                waiting = [c for c in _conditions(workload) if c.get("type") in ("QuotaReserved", "Admitted")]
                if waiting:
                    return f"Workload {workload['metadata']['name']} {_condition_text(waiting[0])}"
    return None


def _gang_group(job: dict[str, Any]) -> str | None:
    """The Kubernetes PodGroup a batch Job's pods belong to (spec.template.spec.schedulingGroup)."""
    if job.get("apiVersion") != "batch/v1":
        return None
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    name = (pod.get("schedulingGroup") or {}).get("podGroupName")
    return str(name) if name else None


def _gang_reason(cluster: Cluster, job: dict[str, Any], group: str) -> str | None:
    """Why the default scheduler holds a gang: what it wrote in its pods' PodScheduled condition,
    the pod group's own verdict first (`pod group is unschedulable, minCount (4) cannot be
    satisfied: …`), else a pod's (`0/3 nodes are available: …`)."""
    meta = job["metadata"]
    pods = cluster.list("v1", "Pod", namespace=meta.get("namespace"), selector=f"{JOB_NAME}={meta['name']}")
    said = [
        " ".join(str(c.get("message") or "").split())
        for pod in pods
        for c in _conditions(pod)
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    if not said:
        return None
    words = next((m for m in said if m.startswith("pod group")), said[0])
    return f"PodGroup {group} (scheduling.k8s.io): Unschedulable: {words}"


def _names_of(tree: Any, key: str) -> set[str]:
    """Every value of ``key`` anywhere in a JSON tree (a job's pod templates' priorityClassName)."""
    if isinstance(tree, dict):
        found = {str(tree[key])} if tree.get(key) else set()
        return found.union(*(_names_of(value, key) for value in tree.values()))
    if isinstance(tree, list):
        return set().union(*(_names_of(item, key) for item in tree))
    return set()


def _no_workload(cluster: Cluster, job: dict[str, Any]) -> str:
    """A job Kueue manages but has made no Workload for. Kueue records nothing in the API then
    (only its log says why): the objects the job names that the cluster lacks are the reason."""
    meta = job["metadata"]
    labels, namespace = meta.get("labels") or {}, meta.get("namespace")
    lacks = []
    queue = labels[QUEUE_LABEL]
    if cluster.served(*LOCAL_QUEUE) and cluster.get(*LOCAL_QUEUE, queue, namespace=namespace) is None:
        lacks.append(f"LocalQueue {queue} (namespace {namespace})")
    named = labels.get(WORKLOAD_PRIORITY_LABEL)
    if named and cluster.served(*WORKLOAD_PRIORITY) and cluster.get(*WORKLOAD_PRIORITY, named) is None:
        lacks.append(f"WorkloadPriorityClass {named}")
    for name in sorted(_names_of(job.get("spec"), "priorityClassName")):
        if cluster.get("scheduling.k8s.io/v1", "PriorityClass", name) is None:
            lacks.append(f"PriorityClass {name}")
    if lacks:
        return f"no Kueue Workload: Kueue makes none while the cluster lacks the {', '.join(lacks)} it names"
    return "no Kueue Workload yet: is Kueue running, with the integration for this kind of job enabled?"


def _podgroup_event(cluster: Cluster, group: dict[str, Any]) -> str | None:
    """A PodGroup the scheduler has not let in (its queue's capability is spent, say) carries
    no condition: Volcano says why in an Unschedulable event on it. The newest one, with the queue."""
    meta, spec = group["metadata"], group.get("spec") or {}
    events = cluster.list(
        "v1",
        "Event",
        namespace=meta.get("namespace"),
        fields=f"involvedObject.uid={meta.get('uid')},reason=Unschedulable",
    )
    if not events:
        return None
    newest = max(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    words = " ".join(str(newest.get("message") or "").split())
    queue = f" in queue {spec['queue']}" if spec.get("queue") else ""
    phase = (group.get("status") or {}).get("phase")
    return f"PodGroup {meta['name']} {phase}{queue}: Unschedulable: {words}"


def run_states(cluster: Cluster, *, train: TrainSpec, pipeline: str, run_id: str | None = None) -> list[RunState]:
    """The state of RUN's job (NotFoundError when the cluster has none), or of every run of the pipeline."""
    api_version, kind = job_kind(train)
    namespace = train.namespace or cluster.namespace
    selector = f"{LABEL_RUN_ID}={run_id}" if run_id else f"{LABEL_PIPELINE}={pipeline}"
    selector += f",{COMPONENT}=train"  # not the eval Jobs of the same pipeline
    jobs = [
        j
        for j in cluster.list(api_version, kind, namespace=namespace, selector=selector)
        if LABEL_RUN_ID in ((j.get("metadata") or {}).get("labels") or {})
    ]
    if run_id and not jobs:
        raise NotFoundError(
            f"no {kind} of run {run_id} in namespace {namespace} of {cluster.server}",
            hint="has the GitOps controller applied the commit? (`trainops train submit` commits it)",
        )
    for job in jobs:  # a list's items may come without their kind (a built-in kind's do)
        job.setdefault("apiVersion", api_version)
        job.setdefault("kind", kind)
    pods = cluster.list("v1", "Pod", namespace=namespace, selector=selector)
    return [_state(cluster, job, pods) for job in sorted(jobs, key=_created)]


def job_restarts(job: dict[str, Any]) -> int:
    """How often the scheduler restarted the job: a Volcano Job's retryCount; a JobSet's restarts
    of the whole gang plus those of single child Jobs (failurePolicy action RestartJob)."""
    status = job.get("status") or {}
    count = int(status.get("retryCount") or 0) + int(status.get("restarts") or 0)
    for replicated in status.get("replicatedJobsStatus") or []:
        count += sum(int(n) for n in replicated.get("jobRestarts") or [])
    return count


def _created(job: dict[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("creationTimestamp") or "")


def _state(cluster: Cluster, job: dict[str, Any], pods: list[dict[str, Any]]) -> RunState:
    meta = job["metadata"]
    run_id = str(meta["labels"][LABEL_RUN_ID])
    mine = [_pod_state(p) for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN_ID) == run_id]
    mine.sort(key=lambda p: p.name)
    phase = job_phase(job)
    if phase == "Running" and mine and not any(p.node for p in mine):
        phase = "Pending"  # an active batch Job none of whose pods is placed yet (a gang held back)
    reason = None if phase in DONE or phase == "Running" else scheduler_reason(cluster, job)
    if reason is None and phase in FAILED:
        failed = [c for c in _conditions(job) if c.get("status") == "True"]
        reason = _condition_text(failed[-1]) if failed else _status_reason(job)
    if reason is None and job.get("kind") == "RayJob" and not (job.get("status") or {}).get("jobDeploymentStatus"):
        reason = (
            "KubeRay has not taken the RayJob up (it has no status): is the KubeRay operator running? "
            "(its CRDs alone do not run it)"
        )
    return RunState(
        run_id=run_id,
        kind=f"{job.get('apiVersion')} {job.get('kind')}",
        namespace=str(meta.get("namespace")),
        name=str(meta["name"]),
        phase=phase,
        reason=reason,
        restarts=job_restarts(job) + sum(p.restarts for p in mine),
        created=meta.get("creationTimestamp"),
        pods=mine,
    )


@dataclass(frozen=True)
class PodLog:
    pod: str
    container: str | None
    text: str


def run_logs(cluster: Cluster, *, train: TrainSpec, run_id: str) -> list[PodLog]:
    """The log of every pod of RUN (its main container), rank 0 first; NotFoundError without pods."""
    namespace = train.namespace or cluster.namespace
    pods = cluster.list("v1", "Pod", namespace=namespace, selector=f"{LABEL_RUN_ID}={run_id},{COMPONENT}=train")
    if not pods:
        raise NotFoundError(
            f"run {run_id} has no pods in namespace {namespace} of {cluster.server}",
            hint="`trainops train status` says whether the scheduler placed it",
        )
    out = []
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        main = "train" if "train" in containers else (containers[0] if containers else None)
        name = str(pod["metadata"]["name"])
        out.append(PodLog(pod=name, container=main, text=cluster.logs(namespace=namespace, pod=name, container=main)))
    return out


def _train(manifest: Manifest) -> TrainSpec:
    train = manifest.pipeline.spec.train
    if train is None or train.scheduler in ("local", "slurm"):
        scheduler = train.scheduler if train is not None else "none (no train section)"
        raise NotFoundError(f"train.scheduler is {scheduler}: no Kubernetes job to read", hint="pick another --env")
    return train


def manifest_runs(
    manifest: Manifest, *, run_id: str | None = None, access: ClusterAccess | None = None
) -> list[RunState]:
    """run_states for the manifest's training job, with the user's kubeconfig."""
    from trainops.faults.query import open_unschedulable  # lazy: loads statistics

    train = _train(manifest)
    with connect(access) as cluster:
        states = run_states(cluster, train=train, pipeline=manifest.pipeline.metadata.name, run_id=run_id)
    if run_id is None or not states:
        return states
    try:
        stuck = open_unschedulable(manifest, run_id=run_id)
    except TrainopsError as err:  # the registry is not the cluster: the status stands without it
        log.warning("trainops: could not read run %s's incidents: %s", run_id, err)
        return states
    if stuck is None:
        return states
    return [*states[:-1], dataclasses.replace(states[-1], blocked=f"{stuck.detail} (incident {stuck.id})")]


def manifest_logs(manifest: Manifest, *, run_id: str, access: ClusterAccess | None = None) -> list[PodLog]:
    """run_logs for the manifest's training job, with the user's kubeconfig."""

    train = _train(manifest)
    with connect(access) as cluster:
        return run_logs(cluster, train=train, run_id=run_id)


def wait_finished(
    cluster: Cluster,
    *,
    train: TrainSpec,
    pipeline: str,
    run_id: str,
    timeout: float,
    poll: float,
    on_change: Callable[[RunState | None], None],
) -> RunState:
    """Poll RUN's job until it finished (Completed or Failed…); RemoteError after `timeout`.

    A job not in the cluster yet (the GitOps controller has not applied it) is waited for;
    `on_change` gets each new phase (None: not there yet).
    """
    deadline = time.monotonic() + timeout
    seen: tuple[str, str | None] | None = None
    while True:
        try:
            state: RunState | None = run_states(cluster, train=train, pipeline=pipeline, run_id=run_id)[0]
        except NotFoundError:
            state = None
        now_seen = (state.phase, state.reason) if state is not None else ("absent", None)
        if now_seen != seen:
            on_change(state)
            seen = now_seen
        if state is not None and state.finished:
            return state
        now = time.monotonic()
        if now >= deadline:
            phase = state.phase if state is not None else "not in the cluster"
            raise RemoteError(
                f"timed out after {timeout:g} s waiting for run {run_id}'s job ({phase})",
                hint="run `trainops run` again to keep waiting: the job is not submitted twice",
            )
        time.sleep(min(poll, max(0.0, deadline - now)))
