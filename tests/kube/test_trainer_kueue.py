"""The kubeflow target queued by Kueue: with train.queue the TrainJob carries Kueue's
queue-name label, and the real Kueue (v0.19.2, its TrainJob integration on) admits it whole
or holds it suspended with no pod; the real Trainer (v2.3.0) makes the JobSet of an admitted
TrainJob only. The tenants' ClusterQueue and LocalQueue are trainops' render of spec.tenants;
4 kwok nodes × 8 GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.manifest import load_manifest
from trainops.train.kube_jobs import RunState, run_states
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import apply, render_job, render_tenants
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "jobset", "kueue", "trainer")
TRAINER = "trainer.kubeflow.org/v1alpha1"
NS = "kq"
TRAIN: dict[str, Any] = {
    "scheduler": "kubeflow", "namespace": NS, "queue": NS, "priorityClass": None, "topology": None,
    "maxRunDuration": None,
}  # fmt: skip
TENANT = {
    "name": NS,
    "namespaces": [NS],
    "gpus": {"deserved": 16},  # two 8-GPU nodes
    "cpu": {"deserved": "4096"},
    "memory": {"deserved": "64Ti"},
}


@pytest.fixture(autouse=True)
def _no_trainjobs_left(sim: KubeCluster) -> Iterator[None]:
    yield
    for job in sim.api.list(TRAINER, "TrainJob", NS):
        sim.api.delete(TRAINER, "TrainJob", job["metadata"]["name"], NS)
    wait_for(lambda: not sim.api.list("v1", "Pod", NS), timeout=60, what="the TrainJobs' pods deleted")


def _pods(sim: KubeCluster, run_id: str) -> list[dict[str, Any]]:
    return sim.api.list("v1", "Pod", NS, selector=f"trainops.dev/run-id={run_id}")


def test_kueue_admits_a_trainjob_whole_or_holds_it_with_no_pod(sim: KubeCluster, tmp_path: Path) -> None:
    apply(sim.api, render_tenants(tmp_path / "t", tenants=[TENANT], **TRAIN))
    big = render_job(tmp_path / "big", run_id="big", nodes=3, **TRAIN)  # 24 GPUs: over the quota
    job = next(o for o in big if o["kind"] == "TrainJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == NS
    apply(sim.api, big)
    manifest = load_manifest(tmp_path / "big" / "trainops.yaml", env="sim")
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        seen: list[RunState] = []

        def held() -> bool:
            seen[:] = run_states(cluster, train=manifest.require_train(), pipeline="tiny-llm", run_id="big")
            return bool(seen[0].reason and "QuotaReserved" in seen[0].reason)

        wait_for(held, timeout=60, what="the big TrainJob's Workload waiting for quota", interval=0.5)
        state = seen[0]
        assert state.phase == "Suspended" and "insufficient" in str(state.reason), state
        assert sim.api.get(TRAINER, "TrainJob", job["metadata"]["name"], NS)["spec"]["suspend"] is True
        assert _pods(sim, "big") == []  # no rank at all: all or nothing

        small = render_job(tmp_path / "small", run_id="small", nodes=2, **TRAIN)  # 16 GPUs: fits
        apply(sim.api, small)
        wait_for(
            lambda: len([p for p in _pods(sim, "small") if p["spec"].get("nodeName")]) == 2,
            timeout=90,
            what="the admitted TrainJob's two ranks placed",
            interval=0.5,
        )
        assert _pods(sim, "big") == []
        small_state = run_states(cluster, train=manifest.require_train(), pipeline="tiny-llm", run_id="small")[0]
        assert small_state.phase in ("Pending", "Running") and small_state.reason is None, small_state
