"""Network-topology-aware placement by the real Volcano scheduler: tiny-llm's training job at
128 GPUs (16 nodes × 8) with its `topology: hard, highestTierAllowed: 1`, on 48 kwok nodes
in 3 racks of 16 under 2 spines, the racks and spines declared as HyperNodes (tier 1, 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import (
    apply,
    delete_all,
    podgroup_says,
    priority_class,
    racks_of,
    render_job,
    render_tenants,
    stays_unbound,
    wait_bound,
)

SHAPE = Shape(nodes=48, racks=3, spines=2)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "kwok", "volcano")
VJOB = "batch.volcano.sh/v1alpha1"
NS = "topo"


def _setup(sim: KubeCluster, tmp_path: Path) -> None:
    tenants = [{"name": NS, "namespaces": [NS], "gpus": {"capability": 384}, "weight": 1}]
    apply(sim.api, render_tenants(tmp_path / "t", namespace=NS, queue=NS, tenants=tenants))
    apply(sim.api, [priority_class("research-normal", 1000)])


def _submit(sim: KubeCluster, tmp_path: Path, run_id: str, **train: Any) -> str:
    objects = render_job(tmp_path / run_id, run_id=run_id, namespace=NS, queue=NS, **train)
    (job,) = [o for o in objects if o["kind"] == "Job" and o["apiVersion"] == VJOB]
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    apply(sim.api, objects)
    return str(job["metadata"]["name"])


def test_a_128_gpu_job_waits_rather_than_straddle_racks_then_lands_inside_one(sim: KubeCluster, tmp_path: Path) -> None:
    _setup(sim, tmp_path)
    # one node of each rack cordoned: 45 nodes free, but no rack has 16
    cordoned = [sim.nodes[i] for i in (0, 16, 32)]
    for node in cordoned:
        sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": True}})
    try:
        job = _submit(sim, tmp_path, "r128", nodes=16)
        said = podgroup_says(sim.api, NS, job)
        stays_unbound(sim.api, NS, job, seconds=3)
        assert "16" in said, said
        sim.api.merge_patch("v1", "Node", cordoned[1], {"spec": {"unschedulable": False}})
        bound = wait_bound(sim.api, NS, job, 16)
        assert len(set(bound.nodes)) == 16
        assert racks_of(sim, bound.nodes) == {"rack-1"}
    finally:
        for node in cordoned:
            sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": False}})
        delete_all(sim.api, NS, VJOB, "Job")


def test_two_128_gpu_jobs_each_fill_a_rack_of_their_own(sim: KubeCluster, tmp_path: Path) -> None:
    _setup(sim, tmp_path)
    try:
        small = _submit(sim, tmp_path, "one", nodes=1)
        (taken,) = wait_bound(sim.api, NS, small, 1).nodes
        jobs = [_submit(sim, tmp_path, f"r128-{i}", nodes=16) for i in range(2)]
        racks = [racks_of(sim, wait_bound(sim.api, NS, job, 16).nodes) for job in jobs]
        assert all(len(r) == 1 for r in racks), racks
        # the rack with the small job has 15 free nodes: neither 128-GPU job fits there
        assert racks_of(sim, [taken]).isdisjoint(racks[0] | racks[1]), (taken, racks)
        assert racks[0] != racks[1]
    finally:
        delete_all(sim.api, NS, VJOB, "Job")
