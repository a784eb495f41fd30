"""What trainops renders for Volcano, scheduled by the real Volcano scheduler and controllers.

The jobs are examples/tiny-llm's training job rendered by trainops (``render_job``) with a
few train fields changed; the tenants' Queues are trainops' render of spec.tenants. The
cluster (tests/kube/conftest.py) has 8 kwok nodes × 8 GPUs in 2 racks of 4.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.train.kube_jobs import scheduler_reason
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_config import VOLCANO_PREEMPTING_CONF, VOLCANO_SCHEDULER_CONF
from trainops_testing.kube_jobs import (
    Placement,
    apply,
    delete_all,
    placement,
    podgroup,
    podgroup_says,
    priority_class,
    render_job,
    render_tenants,
    stays_unbound,
    wait_bound,
)
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=8, racks=2, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "kwok", "volcano")
VJOB = "batch.volcano.sh/v1alpha1"


def _tenant(namespace: str, *, capability: int, deserved: int | None = None) -> list[dict[str, Any]]:
    gpus: dict[str, Any] = {"capability": capability, "deserved": deserved if deserved is not None else capability}
    return [{"name": namespace, "namespaces": [namespace], "gpus": gpus, "weight": 1}]


def _job(objects: list[dict[str, Any]]) -> str:
    (job,) = [o for o in objects if o["kind"] == "Job" and o["apiVersion"] == VJOB]
    return str(job["metadata"]["name"])


def _submit(sim: KubeCluster, tmp_path: Path, run_id: str, **train: Any) -> str:
    objects = render_job(tmp_path / run_id, run_id=run_id, **train)
    apply(sim.api, objects)
    return _job(objects)


def _cleanup(sim: KubeCluster, namespace: str) -> None:
    delete_all(sim.api, namespace, VJOB, "Job")


def test_gang_binds_all_four_pods_to_distinct_nodes_or_none(sim: KubeCluster, tmp_path: Path) -> None:
    ns = "gang"
    apply(sim.api, render_tenants(tmp_path / "t", namespace=ns, queue=ns, tenants=_tenant(ns, capability=64)))
    apply(sim.api, [priority_class("research-normal", 1000)])
    # Only 3 nodes free: 5 of the 8 are cordoned.
    for node in sim.nodes[3:]:
        sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": True}})
    try:
        job = _submit(sim, tmp_path, "gang4", namespace=ns, queue=ns, nodes=4, topology=None)
        reason = podgroup_says(sim.api, ns, job)
        assert "4" in reason and "unschedulable" in reason.lower(), reason
        pending = stays_unbound(sim.api, ns, job, seconds=3)
        assert pending.pods in (0, 4), pending  # Volcano may hold the pods back, never bind some
        sim.api.merge_patch("v1", "Node", sim.nodes[3], {"spec": {"unschedulable": False}})
        bound = wait_bound(sim.api, ns, job, 4)
        assert len(set(bound.nodes)) == 4, bound.nodes
        assert set(bound.nodes) == set(sim.nodes[:4])
    finally:
        for node in sim.nodes[3:]:
            sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": False}})
        _cleanup(sim, ns)


def test_queue_capability_keeps_the_next_job_pending_and_names_the_queue(sim: KubeCluster, tmp_path: Path) -> None:
    ns = "quota"
    tenants = render_tenants(tmp_path / "t", namespace=ns, queue=ns, tenants=_tenant(ns, capability=32, deserved=16))
    (queue,) = [o for o in tenants if o["kind"] == "Queue"]
    assert queue["spec"]["capability"]["nvidia.com/gpu"] in (32, "32")
    apply(sim.api, tenants)
    apply(sim.api, [priority_class("research-normal", 1000)])
    try:
        first = _submit(sim, tmp_path, "fill", namespace=ns, queue=ns, nodes=4, topology=None)
        wait_bound(sim.api, ns, first, 4)  # 32 GPUs: the queue's whole capability
        second = _submit(sim, tmp_path, "over", namespace=ns, queue=ns, nodes=1, topology=None)
        stays_unbound(sim.api, ns, second, seconds=3)
        pg = podgroup(sim.api, ns, second)
        assert pg["spec"]["queue"] == ns
        assert pg["status"].get("phase") == "Pending", pg["status"]
        # trainops' own reader (train status) says why, from what Volcano recorded
        with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
            job = cluster.get(VJOB, "Job", second, namespace=ns)
            assert job is not None
            reason = ""

            def said() -> bool:
                nonlocal reason
                reason = scheduler_reason(cluster, job) or ""
                return bool(reason)

            wait_for(said, timeout=30, what=f"the scheduler's reason for {ns}/{second}", interval=0.2)
        assert reason.startswith(f"PodGroup {pg['metadata']['name']} Pending in queue {ns}: Unschedulable: "), reason
        assert "queue resource quota insufficient" in reason and "nvidia.com/gpu" in reason, reason
        # free nodes exist: it is the queue, not the cluster, that holds the job back
        assert placement(sim.api, ns, first).bound == 4
    finally:
        _cleanup(sim, ns)


def test_higher_priority_job_preempts_a_lower_one_which_is_requeued(sim: KubeCluster, tmp_path: Path) -> None:
    ns = "prio"
    apply(sim.api, render_tenants(tmp_path / "t", namespace=ns, queue=ns, tenants=_tenant(ns, capability=64)))
    apply(sim.api, [priority_class("prio-low", 100), priority_class("prio-high", 10000)])
    # a configuration that preempts for a pending job in a full cluster (kube_config.py says why)
    sim.reconfigure_volcano(VOLCANO_PREEMPTING_CONF)
    try:
        low = _submit(sim, tmp_path, "low", namespace=ns, queue=ns, nodes=8, topology=None, priorityClass="prio-low")
        wait_bound(sim.api, ns, low, 8)  # the whole cluster
        high = _submit(sim, tmp_path, "high", namespace=ns, queue=ns, nodes=2, topology=None, priorityClass="prio-high")
        wait_bound(sim.api, ns, high, 2, timeout=90)
        # the low job is not lost: it still exists and waits for the whole cluster again
        job = sim.api.get(VJOB, "Job", low, ns)
        assert job["status"]["state"]["phase"] not in ("Failed", "Aborted", "Terminated"), job["status"]
        now = placement(sim.api, ns, low)
        assert not now.partial, now
        # the whole gang was evicted and waits again in full: its 8 pods recreated, none bound
        wait_for(lambda: placement(sim.api, ns, low) == Placement(8, ()), timeout=30, what=f"{ns}/{low} requeued whole")
        assert podgroup(sim.api, ns, low)["status"]["phase"] in ("Pending", "Inqueue")
    finally:
        sim.reconfigure_volcano(VOLCANO_SCHEDULER_CONF)
        _cleanup(sim, ns)


def test_each_pod_restores_its_own_node_share(sim: KubeCluster, tmp_path: Path) -> None:
    """The restore step's node rank: 0 on the master, 1 + VC_TASK_INDEX (Volcano's env plugin,
    in the init containers of the pods it creates) on each worker."""
    ns = "shares"
    apply(sim.api, render_tenants(tmp_path / "t", namespace=ns, queue=ns, tenants=_tenant(ns, capability=64)))
    apply(sim.api, [priority_class("research-normal", 1000)])
    try:
        job = _submit(sim, tmp_path, "shares3", namespace=ns, queue=ns, nodes=3, topology=None)
        wait_bound(sim.api, ns, job, 3)
        ranks = []
        for pod in sim.api.list("v1", "Pod", ns):
            (restore,) = [c for c in pod["spec"]["initContainers"] if c["name"] == "ckpt-restore"]
            node_rank = restore["command"][restore["command"].index("--node-rank") + 1]
            env = {e["name"]: e.get("value") for e in restore.get("env", [])}
            ranks.append(int(node_rank) if node_rank.isdigit() else int(env["VC_TASK_INDEX"]) + 1)
        assert sorted(ranks) == [0, 1, 2]
    finally:
        _cleanup(sim, ns)
