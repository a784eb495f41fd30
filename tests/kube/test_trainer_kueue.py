"""The kubeflow target queued by Kueue: with train.queue the TrainJob carries Kueue's
queue-name label, and the real Kueue (v0.19.2, its TrainJob integration on) admits it whole
or holds it suspended with no pod; the real Trainer (v2.3.0) makes the JobSet of an admitted
TrainJob only. The tenants' ClusterQueue and LocalQueue are trainops' render of spec.tenants;
4 kwok nodes × 8 GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.manifest import load_manifest
from trainops.train.kube_jobs import run_states
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import delete_jobs, kueue_holds_then_admits, kueue_train

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "jobset", "kueue", "trainer")
TRAINER = "trainer.kubeflow.org/v1alpha1"
NS = "kq"


@pytest.fixture(autouse=True)
def _no_trainjobs_left(sim: KubeCluster) -> Iterator[None]:
    yield
    delete_jobs(sim.api, NS, TRAINER, "TrainJob")


def test_kueue_admits_a_trainjob_whole_or_holds_it_with_no_pod(sim: KubeCluster, tmp_path: Path) -> None:
    train = kueue_train("kubeflow", NS)
    # admitted: its two ranks, placed together
    manifest = kueue_holds_then_admits(sim, tmp_path, train=train, api_version=TRAINER, kind="TrainJob", placed=2)
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        spec = load_manifest(manifest, env="sim").require_train()
        small = run_states(cluster, train=spec, pipeline="tiny-llm", run_id="small")[0]
    assert small.phase in ("Pending", "Running") and small.reason is None, small
