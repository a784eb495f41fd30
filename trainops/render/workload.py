"""Kubernetes' own gang scheduling (1.37, the Workload API): a Workload, its PodGroup, and an
Indexed batch/v1 Job whose pods name the PodGroup, for the default scheduler.

For clusters that run neither Volcano nor Kueue. The Workload (scheduling.k8s.io/v1beta1)
describes the job's one pod group, gang-scheduled with `minCount` = train.nodes and
disrupted as a whole (`disruptionMode: all`); the PodGroup is that group's runtime
instance, which a workload controller would make from the template and which the Job
controller does not make (its `WorkloadWithJob` gate is alpha), so trainops renders it,
named after the job. Every pod carries `schedulingGroup.podGroupName`, and the default
scheduler binds none of them until it can bind all `minCount`.

The Job is the Kueue Job's (trainops.render.kueue.indexed_objects: the headless Service that
is the pods' subdomain, completion-indexed ranks, backoffLimit maxRetry × nodes) without
the queue label. train.priorityClass names the pods' PriorityClass and the pod group's.

The API is beta and off by default in 1.37: the API server needs `--feature-gates=
GenericWorkload=true` and `--runtime-config=scheduling.k8s.io/v1beta1=true`, the scheduler
and controller-manager the same gate (trainops.cluster.installs says so when a cluster does
not serve it).
"""

from __future__ import annotations

from typing import Any

from trainops.render.context import RunContext
from trainops.render.kueue import indexed_objects

API_VERSION = "scheduling.k8s.io/v1beta1"
TEMPLATE = "gang"


def _policy(ctx: RunContext) -> dict[str, Any]:
    """What the Workload's template and the PodGroup share: all-or-nothing, disrupted together."""
    out: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": ctx.train.nodes}},
        "disruptionMode": {"all": {}},
    }
    if ctx.train.priority_class:
        out["priorityClassName"] = ctx.train.priority_class
    return out


def gang_job(ctx: RunContext) -> list[dict[str, Any]]:
    """The headless Service, the Workload, the PodGroup, then the Job."""
    if ctx.train.topology is not None:
        ctx.warn(
            "train.topology is not rendered for the kubernetes scheduler (its topology constraints are alpha in "
            "1.37); use volcano or kueue to keep a job inside a rack"
        )
    service, job = indexed_objects(
        ctx,
        labels=ctx.labels(),
        annotations={},
        pod_spec=lambda name: {"schedulingGroup": {"podGroupName": name}},
    )
    name = job["metadata"]["name"]
    workload = {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": ctx.metadata(name),
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
            "podGroupTemplates": [{"name": TEMPLATE, **_policy(ctx)}],
        },
    }
    podgroup = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": ctx.metadata(name),
        "spec": {"workloadRef": {"workloadName": name, "templateName": TEMPLATE}, **_policy(ctx)},
    }
    return [service, workload, podgroup, job]
