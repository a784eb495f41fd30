"""Kubernetes nodes under a failing run: what they say about their health, and cordoning one.

THE ONE WRITE TRAINOPS MAKES TO A CLUSTER OUTSIDE GIT. Everything else trainops changes on a
cluster goes through a commit that the GitOps controller applies; a node is not in git (the
cluster's provider or its operators own it), and a broken GPU must stop taking work at once,
not at the controller's next sync. So, on a hardware fault (the `drain` action),
`cordon_node` patches the Node through the API server with the user's kubeconfig:

- `spec.unschedulable: true` (what `kubectl cordon` does): no new pod lands there;
- the taint `trainops.dev/fault=<fault class>:NoSchedule`, which says why to schedulers and
  to people (`kubectl describe node`), and which operators remove when the node is repaired;
- the annotation `trainops.dev/fault-reason`: the diagnosis in one line (a taint's value is
  a label value: no spaces, 63 characters).

Pods already running there are left alone (a drain, like Slurm's, takes no new work; the
failed run's own pods are replaced through git). The patch names the Node's resourceVersion,
so a concurrent change (a node controller's taint) makes the server refuse it and it is
read and tried again. The user needs RBAC `patch` on nodes; without it the error says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainops.cluster.client import Cluster, ObjectRefused
from trainops.errors import RemoteError

FAULT_TAINT = "trainops.dev/fault"
REASON_ANNOTATION = "trainops.dev/fault-reason"
READY = "Ready"
_ATTEMPTS = 5


@dataclass(frozen=True)
class NodeHealth:
    """One Node as the API server sees it: gone, not Ready, and the conditions that report trouble."""

    name: str
    exists: bool
    ready: bool
    ready_note: str  # the Ready condition's reason and message (why it is not Ready)
    problems: list[str]  # "Type: message" of every other condition that is True (node-problem-detector)
    cordoned: bool


@dataclass(frozen=True)
class Cordon:
    node: str
    taint: str  # key=value:effect
    reason: str
    already: bool  # the node carried trainops' taint for this fault before


# The conditions a kubelet reports that are True when all is well, or that are not faults of a GPU job.
_QUIET = frozenset({READY, "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})


def node_health(cluster: Cluster, name: str) -> NodeHealth:
    node = cluster.get("v1", "Node", name)
    if node is None:
        return NodeHealth(name, False, False, "the Node object is gone", [], False)
    conditions = [c for c in (node.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    ready = next((c for c in conditions if c.get("type") == READY), None)
    is_ready = ready is not None and ready.get("status") == "True"
    note = f"{ready.get('reason') or ''}: {ready.get('message') or ''}".strip(": ") if ready else "no Ready condition"
    problems = [
        f"{c.get('type')}: {c.get('message') or c.get('reason') or ''}".rstrip(": ")
        for c in conditions
        if c.get("type") not in _QUIET and c.get("status") == "True"
    ]
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    return NodeHealth(name, True, is_ready, note, problems, cordoned)


def node_events(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    """The Warning events about a Node, every namespace (what node-problem-detector and GPU
    health agents report: an Xid, a kernel oops)."""
    selector = f"involvedObject.kind=Node,involvedObject.name={name},type=Warning"
    data = cluster.get_json("/api/v1/events", params={"fieldSelector": selector}) or {}
    return [e for e in data.get("items") or [] if isinstance(e, dict)]


def cordon_node(cluster: Cluster, *, node: str, fault: str, reason: str) -> Cordon:
    """Cordon and taint a failed node (the module docstring: the one write outside git)."""
    taint = {"key": FAULT_TAINT, "value": fault[:63], "effect": "NoSchedule"}
    for _ in range(_ATTEMPTS):
        live = cluster.get("v1", "Node", node)
        if live is None:
            raise RemoteError(f"node {node} is not on the cluster at {cluster.server}; nothing to cordon")
        spec = live.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
        already = any(t.get("key") == FAULT_TAINT and t.get("value") == taint["value"] for t in taints)
        kept = [t for t in taints if not (t.get("key") == FAULT_TAINT and t.get("effect") == "NoSchedule")]
        patch = {
            "metadata": {
                "resourceVersion": (live.get("metadata") or {}).get("resourceVersion"),
                "annotations": {REASON_ANNOTATION: f"trainops: {reason}"[:1000]},
            },
            "spec": {"unschedulable": True, "taints": [*kept, taint]},
        }
        try:
            cluster.merge_patch("v1", "Node", node, patch)
        except ObjectRefused as err:
            if err.status == 409:  # changed since the read: read it again
                continue
            raise RemoteError(f"cordoning node {node} was refused: {err}") from None
        return Cordon(node, f"{FAULT_TAINT}={taint['value']}:NoSchedule", reason, already)
    raise RemoteError(f"node {node} kept changing while trainops cordoned it ({_ATTEMPTS} attempts)")
