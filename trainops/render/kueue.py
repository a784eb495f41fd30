"""Kueue: a JobSet (jobset.x-k8s.io/v1alpha2, the default) or an Indexed batch/v1 Job.

Queueing: the job carries `kueue.x-k8s.io/queue-name` (train.queue, a LocalQueue). Its pods
carry train.priorityClass as `priorityClassName`, the Kubernetes PriorityClass every scheduler
of trainops uses: Kueue takes a Workload's priority from its pod template's PriorityClass when
the job names no WorkloadPriorityClass (the `kueue.x-k8s.io/priority-class` label, not
rendered: Kueue makes no Workload at all for a job whose label names a class the cluster
lacks, and trainops renders none). `validate --kubeconfig` reports a PriorityClass the cluster
lacks. train.maxRunDuration becomes
`kueue.x-k8s.io/max-exec-time-seconds`, which Kueue counts across suspensions, as well as the
pods' activeDeadlineSeconds.

`spec.suspend` is not rendered: Kueue's mutating webhook suspends a queued job on creation
(its docs: "you do not need to create the Job in a suspended state"), and a `suspend: true`
in git would make Argo CD self-heal suspend the job again right after Kueue admitted it.

Topology-aware scheduling: every pod template gets
`kueue.x-k8s.io/podset-required-topology` (mode hard) or `…-preferred-topology` (soft) set
to train.topology.level; the JobSet's two pod sets also share a
`kueue.x-k8s.io/podset-group-name`, so the leader lands in the workers' domain.

JobSet: replicatedJob `leader` (one pod, rank 0, with the checkpoint watcher) and `workers`
(one Indexed Job of nodes-1 pods). Pods are reachable as `<jobset>-<job>-<index>-<pod>.<jobset>`.
A failed pod fails its Job (backoffLimit 0) and the JobSet's failurePolicy acts on that Job's
failure: faultTolerance.maxRetry is `maxRestarts` (restarts, as on Slurm and Volcano) and
faultTolerance.action, in Volcano's words, is one rule: RestartJob restarts the gang (the
JobSet recreates every Job, so every node restarts from the same checkpoint), RestartTask
recreates only the failed child Job (the leader or the workers), AbortJob and TerminateJob
fail the JobSet. The strategy is written out (`Recreate`: JobSet's default, which Argo CD
would otherwise see as a difference; the policy is immutable once created).

Job: completionMode Indexed, parallelism = completions = nodes, and a headless Service (same
name) that is the pods' subdomain, so pod 0 is `<job>-0.<job>`. One pod template serves every
rank, so the watcher gets `--leader-only` and TRAINOPS_NODE_RANK from the completion index.
A gang failure fails every pod, so backoffLimit is maxRetry × nodes; a replacement pod
starts only after the one it replaces has terminated (podReplacementPolicy: Failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT
from trainops.render.names import digits, object_name
from trainops.render.pod import PodRole, pod_template
from trainops.render.topology import kueue_level

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TAS_GROUP = "kueue.x-k8s.io/podset-group-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEADER, WORKERS = "leader", "workers"


def queue_labels(ctx: RunContext) -> dict[str, str]:
    """The job's labels with its LocalQueue (train.queue, required) and train.maxRunDuration."""
    train = ctx.train
    if not train.queue:
        raise InputError(
            "train.queue is not set: Kueue admits a job through a LocalQueue, and ignores one without it",
            hint="set train.queue to a LocalQueue of train.namespace (spec.tenants renders one per tenant)",
        )
    labels = ctx.labels()
    labels[QUEUE_LABEL] = train.queue
    if train.max_run_duration:
        labels[MAX_EXEC_LABEL] = str(int(duration_seconds(train.max_run_duration)))
    return labels


def _topology(ctx: RunContext, *, group: str | None) -> dict[str, str]:
    topology = ctx.train.topology
    if topology is None:
        return {}
    fabric = ctx.spec.cluster.topology if ctx.spec.cluster is not None else None
    level = kueue_level(fabric, level=topology.level, highest_tier=topology.highest_tier_allowed)
    if not level:
        raise InputError(
            "train.topology: Kueue places pods by a node label; set train.topology.level, or declare "
            "spec.cluster.topology so that highestTierAllowed names a tier",
            hint="for example level: cloud.provider.com/topology-block (a level of the cluster's Topology)",
        )
    if topology.highest_tier_allowed is not None and fabric is None:
        ctx.warn("train.topology.highestTierAllowed is for Volcano; Kueue uses train.topology.level")
    out = {TAS_REQUIRED if topology.mode == "hard" else TAS_PREFERRED: level}
    if group:
        out[TAS_GROUP] = group
    return out


# faultTolerance.action (Volcano's words) → the JobSet failure policy rule's action
JOBSET_ACTIONS = {
    "RestartJob": ("restartGang", "RestartJobSet"),
    "RestartTask": ("restartFailedJob", "RestartJob"),
    "AbortJob": ("failJobSet", "FailJobSet"),
    "TerminateJob": ("failJobSet", "FailJobSet"),
}


def failure_policy(ctx: RunContext) -> dict[str, Any]:
    """The JobSet's failurePolicy from train.faultTolerance."""
    tolerance = ctx.train.fault_tolerance
    rule = JOBSET_ACTIONS.get(tolerance.action)
    if rule is None:
        raise InputError(
            f"train.faultTolerance.action: {tolerance.action} restarts one pod; a JobSet restarts Jobs",
            hint="use RestartJob (the whole gang) or RestartTask (only the failed child Job)",
        )
    name, action = rule
    return {
        "maxRestarts": tolerance.max_retry,
        "restartStrategy": "Recreate",
        "rules": [{"name": name, "action": action}],
    }


def _job_spec(ctx: RunContext, *, pods: int, backoff: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed",
        "backoffLimit": backoff,
        "podReplacementPolicy": "Failed",
        "template": template,
    }


def jobset(ctx: RunContext) -> dict[str, Any]:
    train = ctx.train
    workers = train.nodes - 1
    # pod hostname: <jobset>-<replicatedJob>-<job index>-<pod index>
    name = object_name(ctx.pipeline, ctx.run_id, reserve=len(f"-{WORKERS}-0-") + digits(max(workers, 1)))
    endpoint = f"{name}-{LEADER}-0-0.{name}:{RDZV_PORT}"
    labels = queue_labels(ctx)
    group = name if workers else None
    shared = train.checkpoint.claim is not None
    leader = PodRole(
        role="leader",
        endpoint=endpoint,
        is_host=True,
        sidecar=True,
        restore_rank="0" if workers and not shared else None,  # each worker restores its own share
        annotations=_topology(ctx, group=group),
    )
    replicated = [
        {
            "name": LEADER,
            "replicas": 1,
            "template": {"spec": _job_spec(ctx, pods=1, backoff=0, template=pod_template(ctx, leader))},
        }
    ]
    if workers:
        worker = PodRole(
            role="worker",
            endpoint=endpoint,
            is_host=False,
            restore=not shared,
            restore_rank="auto+1",  # its completion index counts the workers: node 1 is index 0
            annotations=_topology(ctx, group=group),
        )
        replicated.append(
            {
                "name": WORKERS,
                "replicas": 1,
                "template": {"spec": _job_spec(ctx, pods=workers, backoff=0, template=pod_template(ctx, worker))},
            }
        )
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "failurePolicy": failure_policy(ctx),
        "replicatedJobs": replicated,
    }
    if train.ttl_after_finished:
        spec["ttlSecondsAfterFinished"] = int(duration_seconds(train.ttl_after_finished))
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": ctx.metadata(name, labels=labels),
        "spec": spec,
    }


def indexed_job(ctx: RunContext) -> list[dict[str, Any]]:
    """The headless Service for the rendezvous, then the Job."""
    return indexed_objects(ctx, labels=queue_labels(ctx), annotations=_topology(ctx, group=None))


def indexed_objects(
    ctx: RunContext,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    pod_spec: Callable[[str], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The headless Service (the pods' subdomain), then the Indexed Job of train.nodes pods with
    ``labels``, its pods' ``annotations``, and what ``pod_spec(name)`` adds to their spec."""
    train = ctx.train
    name = object_name(ctx.pipeline, ctx.run_id, reserve=1 + digits(train.nodes))  # hostname <job>-<index>
    endpoint = f"{name}-0.{name}:{RDZV_PORT}"
    role = PodRole(
        role="node",
        endpoint=endpoint,
        sidecar=True,
        leader_only=True,
        subdomain=name,
        annotations=annotations,
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: name},
            "ports": [{"name": "rdzv", "port": RDZV_PORT, "targetPort": RDZV_PORT, "protocol": "TCP"}],
        },
    }
    template = pod_template(ctx, role)
    if pod_spec is not None:
        template["spec"].update(pod_spec(name))
    spec = _job_spec(
        ctx,
        pods=train.nodes,
        backoff=train.fault_tolerance.max_retry * train.nodes,
        template=template,
    )
    if train.ttl_after_finished:
        spec["ttlSecondsAfterFinished"] = int(duration_seconds(train.ttl_after_finished))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": ctx.metadata(name, labels=labels), "spec": spec}
    return [service, job]
