"""Kubeflow training operator: one kubeflow.org/v1 PyTorchJob.

Replica specs `Master` (one pod, rank 0, with the checkpoint watcher) and `Worker` (nodes-1
pods; none for one node). The operator requires the container to be named `pytorch` and its
port `pytorchjob-port`; it creates a Service per pod, so `<job>-master-0` is the rendezvous
host. Pods restart in place on failure (restartPolicy OnFailure) up to
runPolicy.backoffLimit = faultTolerance.maxRetry; their checkpoint directory survives a
container restart. `runPolicy.schedulingPolicy` carries the gang (minAvailable), queue and
priority class to Volcano or scheduler-plugins; maxRunDuration is the job's
activeDeadlineSeconds; finished jobs delete pods still running (cleanPodPolicy Running) so
no GPU stays held by a straggler. train.elastic becomes elasticPolicy (c10d rendezvous,
min/max nodes, maxRestarts), and torchrun gets `--nnodes=min:max`.
"""

from __future__ import annotations

from typing import Any

from trainops.manifest.common import duration_seconds
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT, nproc_per_node
from trainops.render.names import digits, object_name
from trainops.render.pod import PodRole, pod_template


def pytorch_job(ctx: RunContext) -> dict[str, Any]:
    train = ctx.train
    workers = train.nodes - 1
    max_workers = (train.elastic.max_nodes - 1) if train.elastic else workers
    # the operator names pods and their Services <job>-worker-<index> (DNS-1035 labels)
    name = object_name(ctx.pipeline, ctx.run_id, reserve=len("-worker-") + digits(max(max_workers, 1)))
    endpoint = f"{name}-master-0:{RDZV_PORT}"
    shared = train.checkpoint.claim is not None
    if train.topology is not None:
        ctx.warn("train.topology has no effect with scheduler pytorchjob (a PyTorchJob has no topology field)")

    spec: dict[str, Any] = {"nprocPerNode": nproc_per_node(train)}
    if train.elastic is not None:
        spec["elasticPolicy"] = {
            "minReplicas": train.elastic.min_nodes,
            "maxReplicas": train.elastic.max_nodes,
            "maxRestarts": train.elastic.max_restarts,
            "rdzvBackend": "c10d",
            "rdzvHost": f"{name}-master-0",
            "rdzvPort": RDZV_PORT,
            "rdzvId": ctx.run_id,
        }
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": train.fault_tolerance.max_retry}
    if train.max_run_duration:
        run_policy["activeDeadlineSeconds"] = int(duration_seconds(train.max_run_duration))
    if train.ttl_after_finished:
        run_policy["ttlSecondsAfterFinished"] = int(duration_seconds(train.ttl_after_finished))
    scheduling: dict[str, Any] = {"minAvailable": train.elastic.min_nodes if train.elastic else train.nodes}
    if train.queue:
        scheduling["queue"] = train.queue
    if train.priority_class:
        scheduling["priorityClass"] = train.priority_class
    run_policy["schedulingPolicy"] = scheduling
    spec["runPolicy"] = run_policy

    def role(
        kind: str, *, is_host: bool, sidecar: bool = False, restore: bool = True, rank: str | None = None
    ) -> PodRole:
        return PodRole(
            role=kind,
            endpoint=endpoint,
            container="pytorch",
            port_name="pytorchjob-port",
            is_host=is_host,
            sidecar=sidecar,
            restore=restore,
            restore_rank=rank,
            restart_policy=None,  # the replica spec's restartPolicy wins
            deadline=False,  # runPolicy.activeDeadlineSeconds instead
        )

    rank = "0" if train.nodes > 1 and not shared else None  # each worker restores its own share
    master = pod_template(ctx, role("leader", is_host=True, sidecar=True, rank=rank))
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": master}}
    if workers:
        worker = pod_template(ctx, role("worker", is_host=False, restore=not shared))
        replicas["Worker"] = {"replicas": workers, "restartPolicy": "OnFailure", "template": worker}
    spec["pytorchReplicaSpecs"] = replicas
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": ctx.metadata(name), "spec": spec}
