"""spec.tenants as scheduler queues: Volcano Queues, or Kueue ClusterQueues with LocalQueues.

Volcano (also for pytorchjob, whose gang scheduler is Volcano): a scheduling.volcano.sh/v1beta1
Queue per tenant — capability, deserved and guarantee.resource from the quotas (GPUs under
train.resources.gpuResource), weight, reclaimable. Volcano queues are not bound to
namespaces, so tenant.namespaces is not used.

Kueue: a ClusterQueue per tenant and a LocalQueue (named like the tenant) in each of its
namespaces, at kueue.x-k8s.io/v1beta2 — the storage version of the vendored Kueue CRDs
(v0.19); v1beta1 is still served there but marked deprecated, so v1beta2 is what a current
cluster stores and what Argo CD will diff against without conversion noise (it needs Kueue
≥ 0.15, where v1beta2 was introduced). Quotas map onto Kueue's model: nominalQuota =
deserved (else guarantee, else capability); in a cohort, borrowingLimit = capability −
nominal and lendingLimit = nominal − guarantee (the part never lent), and the queue may
reclaim its lent quota (preemption.reclaimWithinCohort: Any). Without a cohort nothing is
borrowed or lent. The namespaceSelector matches the tenant's namespaces by
kubernetes.io/metadata.name; a tenant without namespaces admits nothing. The quota is in
tenant.flavor, a ResourceFlavor the cluster defines; without one, the flavor of
spec.cluster.topology when there is one (trainops.render.topology renders it), else
`default-flavor` (no node labels: every node), which trainops renders, shared by every such tenant.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from trainops.manifest.pipeline import PipelineSpec, Tenant, TenantQuota
from trainops.render import quantity
from trainops.render.names import common_labels

KUEUE_VERSION = "kueue.x-k8s.io/v1beta2"
DEFAULT_FLAVOR = "default-flavor"


def _labels(pipeline: str, extra: dict[str, str]) -> dict[str, str]:
    return common_labels(pipeline, run_id=None, component="tenant", extra=extra)


def _quotas(tenant: Tenant, gpu_resource: str) -> list[tuple[str, TenantQuota]]:
    pairs = [("cpu", tenant.cpu), ("memory", tenant.memory), (gpu_resource, tenant.gpus)]
    return [(name, quota) for name, quota in pairs if quota is not None]


def volcano_queues(spec: PipelineSpec, pipeline: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    gpu = spec.train.resources.gpu_resource if spec.train else "nvidia.com/gpu"
    out = []
    for tenant in spec.tenants:
        quotas = _quotas(tenant, gpu)
        body: dict[str, Any] = {"weight": tenant.weight, "reclaimable": tenant.reclaimable}
        for key in ("capability", "deserved"):
            values = {name: getattr(q, key) for name, q in quotas if getattr(q, key) is not None}
            if values:
                body[key] = values
        guarantee = {name: q.guarantee for name, q in quotas if q.guarantee is not None}
        if guarantee:
            body["guarantee"] = {"resource": guarantee}
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": tenant.name, "labels": _labels(pipeline, labels)},
                "spec": body,
            }
        )
    return out


def _kueue_resource(name: str, quota: TenantQuota, *, cohort: bool) -> dict[str, Any]:
    values = [v for v in (quota.guarantee, quota.deserved, quota.capability) if v is not None]
    nominal = quota.deserved if quota.deserved is not None else values[0]
    out: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if cohort and quota.capability is not None:
        spare = quantity.parse(quota.capability) - quantity.parse(nominal)
        out["borrowingLimit"] = quantity.fmt(spare if spare > 0 else Fraction(0), like=(quota.capability, nominal))
    if cohort and quota.guarantee is not None:
        lent = quantity.parse(nominal) - quantity.parse(quota.guarantee)
        out["lendingLimit"] = quantity.fmt(lent if lent > 0 else Fraction(0), like=(nominal, quota.guarantee))
    return out


def kueue_queues(
    spec: PipelineSpec, pipeline: str, labels: dict[str, str], warnings: list[str]
) -> list[dict[str, Any]]:
    gpu = spec.train.resources.gpu_resource if spec.train else "nvidia.com/gpu"
    flavors: list[dict[str, Any]] = []
    cluster: list[dict[str, Any]] = []
    local: list[dict[str, Any]] = []
    meta_labels = _labels(pipeline, labels)
    fabric = spec.cluster.topology if spec.cluster is not None else None
    for i, tenant in enumerate(spec.tenants):
        # with a declared topology, its flavor (rendered with it) is every tenant's default
        flavor = tenant.flavor or (fabric.name if fabric is not None else DEFAULT_FLAVOR)
        if tenant.flavor is None and fabric is None and not flavors:
            flavors.append(
                {
                    "apiVersion": KUEUE_VERSION,
                    "kind": "ResourceFlavor",
                    "metadata": {"name": DEFAULT_FLAVOR, "labels": meta_labels},
                    "spec": {},
                }
            )
        quotas = _quotas(tenant, gpu)
        if not tenant.reclaimable:
            warnings.append(f"tenants[{i}].reclaimable is a Volcano setting; Kueue has no equivalent")
        body: dict[str, Any] = {}
        if tenant.cohort:
            body["cohortName"] = tenant.cohort
        if tenant.namespaces:
            body["namespaceSelector"] = {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(tenant.namespaces)}
                ]
            }
        else:
            warnings.append(f"tenants[{i}] ({tenant.name}) lists no namespaces: its ClusterQueue admits nothing")
        if quotas:
            body["resourceGroups"] = [
                {
                    "coveredResources": [name for name, _ in quotas],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [_kueue_resource(n, q, cohort=bool(tenant.cohort)) for n, q in quotas],
                        }
                    ],
                }
            ]
        else:
            warnings.append(f"tenants[{i}] ({tenant.name}) has no quota: its ClusterQueue admits nothing")
        if tenant.cohort:
            body["preemption"] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        body["fairSharing"] = {"weight": tenant.weight}
        cluster.append(
            {
                "apiVersion": KUEUE_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": tenant.name, "labels": meta_labels},
                "spec": body,
            }
        )
        for namespace in tenant.namespaces:
            local.append(
                {
                    "apiVersion": KUEUE_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": tenant.name, "namespace": namespace, "labels": meta_labels},
                    "spec": {"clusterQueue": tenant.name},
                }
            )
    return flavors + cluster + local


def uncovered(spec: PipelineSpec, requested: list[str]) -> list[str]:
    """Warnings for resources the training requests that a tenant's ClusterQueue does not cover.

    Kueue does not admit a workload that requests a resource its ClusterQueue does not list
    unless Kueue's configuration excludes it (resources.excludeResourcePrefixes) or checks only
    the declared ones (resources.quotaCheckStrategy: IgnoreUndeclared, Kueue v0.19).
    """
    gpu = spec.train.resources.gpu_resource if spec.train else "nvidia.com/gpu"
    out = []
    queue = spec.train.queue if spec.train else None
    for i, tenant in enumerate(spec.tenants):
        if queue and tenant.name != queue:
            continue
        covered = {name for name, _ in _quotas(tenant, gpu)}
        missing = [r for r in requested if r not in covered]
        if missing:
            out.append(
                f"tenants[{i}] ({tenant.name}): the training requests {', '.join(missing)}, which its ClusterQueue "
                "does not cover, and Kueue will not admit it; give the tenant a quota for them, or exclude them "
                "in Kueue's configuration (resources.excludeResourcePrefixes, or quotaCheckStrategy: IgnoreUndeclared)"
            )
    return out
