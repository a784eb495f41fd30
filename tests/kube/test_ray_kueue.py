"""The ray target queued by Kueue: with train.queue the RayJob carries Kueue's queue-name
label, and the real Kueue (v0.19.2, its RayJob integration on) admits the head, the workers
and the submitter as one Workload or not at all; KubeRay (v1.5.0) makes the cluster of an
admitted RayJob only. The tenants' ClusterQueue and LocalQueue are trainops' render of
spec.tenants; 4 kwok nodes × 8 GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import delete_jobs, kueue_holds_then_admits, kueue_train

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "kueue", "kuberay")
RAY = "ray.io/v1"
NS = "rq"


@pytest.fixture(autouse=True)
def _no_rayjobs_left(sim: KubeCluster) -> Iterator[None]:
    yield
    delete_jobs(sim.api, NS, RAY, "RayJob")


def test_kueue_admits_a_rayjob_whole_or_holds_it_with_no_pod(sim: KubeCluster, tmp_path: Path) -> None:
    # admitted: the head, a worker and the submitter, placed together
    kueue_holds_then_admits(sim, tmp_path, train=kueue_train("ray", NS), api_version=RAY, kind="RayJob", placed=3)
