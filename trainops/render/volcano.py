"""Volcano: one batch.volcano.sh/v1alpha1 Job, gang-scheduled.

`minAvailable` is the node count, so Volcano starts every pod or none. Tasks: `master` (one
pod, rank 0, with the checkpoint watcher) and `worker` (nodes-1 pods; no task when the job
has one node). The `pytorch` plugin gives every pod MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK
and opens the port, `svc` creates the headless Service (publishing not-ready addresses, so
the rendezvous host resolves while pods are still starting) and `env` the task indexes.
faultTolerance.restartOn events trigger faultTolerance.action up to maxRetry times (Volcano's
maxRetry is one more: it counts the attempt that fails the job); the
master finishing completes the job. train.topology becomes `networkTopology` (HyperNode
tiers). Every task carries the minAvailable (its replicas) and maxRetry (the job's) that
Volcano's mutating webhook would otherwise fill in at creation: its validating webhook
refuses any later change to them, so a GitOps controller re-applying git's job without
them (Argo CD's self-heal of the difference) would be refused for good.
"""

from __future__ import annotations

from typing import Any

from trainops.manifest.common import duration_seconds
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT
from trainops.render.names import digits, object_name
from trainops.render.pod import PodRole, pod_template

API_VERSION = "batch.volcano.sh/v1alpha1"
MASTER, WORKER = "master", "worker"


def volcano_job(ctx: RunContext) -> dict[str, Any]:
    train = ctx.train
    workers = train.nodes - 1
    # pod hostname: <job>-<task>-<index> must stay a DNS label
    name = object_name(ctx.pipeline, ctx.run_id, reserve=len(f"-{WORKER}-") + digits(max(workers, 1)))
    endpoint = f"{name}-{MASTER}-0.{name}:{RDZV_PORT}"
    shared = train.checkpoint.claim is not None

    spec: dict[str, Any] = {"schedulerName": "volcano", "minAvailable": train.nodes}
    if train.queue:
        spec["queue"] = train.queue
    if train.priority_class:
        spec["priorityClassName"] = train.priority_class
    # Volcano fails the job once its retryCount reaches maxRetry, counting the failure that
    # would start the next attempt: maxRetry N restarts N-1 times (measured on Volcano v1.15.1,
    # tests/kube/test_volcano_faults.py). trainops' maxRetry counts restarts, as on Slurm,
    # JobSet (maxRestarts) and PyTorchJob (backoffLimit).
    spec["maxRetry"] = train.fault_tolerance.max_retry + 1
    if train.ttl_after_finished:
        spec["ttlSecondsAfterFinished"] = int(duration_seconds(train.ttl_after_finished))
    if train.topology is not None:
        topology: dict[str, Any] = {"mode": train.topology.mode}
        if train.topology.highest_tier_allowed is not None:
            topology["highestTierAllowed"] = train.topology.highest_tier_allowed
        spec["networkTopology"] = topology
        if train.topology.level:
            ctx.warn("train.topology.level is for Kueue; Volcano uses mode and highestTierAllowed")
    spec["plugins"] = {
        "pytorch": [f"--master={MASTER}", f"--worker={WORKER}", f"--port={RDZV_PORT}"],
        "svc": ["--publish-not-ready-addresses=true"],
        "env": [],
    }
    spec["policies"] = [{"events": list(train.fault_tolerance.restart_on), "action": train.fault_tolerance.action}]

    master_role = PodRole(
        role="leader",
        endpoint=endpoint,
        port_name="pytorchjob-port",
        is_host=True,
        sidecar=True,
        restore_rank="0" if workers and not shared else None,  # each worker restores its own share
    )
    tasks = [
        {
            "name": MASTER,
            "replicas": 1,
            "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
            "template": pod_template(ctx, master_role),
        }
    ]
    if workers:
        worker_role = PodRole(
            role="worker",
            endpoint=endpoint,
            port_name="pytorchjob-port",
            is_host=False,
            restore=not shared,
            restore_rank="auto+1",  # VC_TASK_INDEX counts the worker task's pods: node 1 is index 0
        )
        tasks.append({"name": WORKER, "replicas": workers, "template": pod_template(ctx, worker_role)})
    for task in tasks:  # what Volcano's admission webhook would default: git is what the cluster stores
        task["minAvailable"] = task["replicas"]
        task["maxRetry"] = spec["maxRetry"]
    spec["tasks"] = tasks
    return {"apiVersion": API_VERSION, "kind": "Job", "metadata": ctx.metadata(name), "spec": spec}
