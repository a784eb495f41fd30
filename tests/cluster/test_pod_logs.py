"""`train logs` where the API server cannot fetch a log: a pod of the run on a kwok node (no
kubelet behind it) of the simulated cluster. The API server answers 500 (it dials the node's
kubelet and is refused); trainops retries it, then says in one line whose log it could not
read and why, exit 6."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import Cluster, connect
from trainops.render.names import LABEL_RUN_ID
from trainops.train.kube_jobs import COMPONENT
from trainops_testing.cli import run
from trainops_testing.kube_cluster import Shape
from trainops_testing.services import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
NAMESPACE = "tiny-llm"  # the example's train.namespace
CORE = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")


@pytest.fixture(scope="module")
def core(kube_cluster_factory: Any) -> Iterator[Any]:
    cluster = kube_cluster_factory(shape=Shape(nodes=2, racks=1), components=CORE)
    yield cluster
    cluster.stop()


def _running_pod(cluster: Cluster, run_id: str) -> dict[str, Any]:
    """A pod labelled as RUN's rank 0 (what the scheduler's job would make), Running on a kwok node."""
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, dry_run=False)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{run_id}-0",
            "namespace": NAMESPACE,
            "labels": {LABEL_RUN_ID: run_id, COMPONENT: "train"},
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "registry.invalid/train"}]},
    }
    cluster.apply(pod, dry_run=False)

    def running() -> bool:
        live = cluster.get("v1", "Pod", pod["metadata"]["name"], namespace=NAMESPACE) or {}
        return (live.get("status") or {}).get("phase") == "Running"

    wait_for(running, timeout=120, what="the pod Running on a kwok node", interval=0.2)
    live = cluster.get("v1", "Pod", pod["metadata"]["name"], namespace=NAMESPACE)
    assert live is not None
    return live


def test_a_log_the_api_server_cannot_fetch_names_the_pod_exit_6(core: Any) -> None:
    with connect(ClusterAccess(str(core.kubeconfig))) as cluster:
        pod = _running_pod(cluster, "r9")
    assert pod["spec"]["nodeName"] in core.nodes
    out = run("train", "logs", "r9", "-f", str(EXAMPLE), "--kubeconfig", str(core.kubeconfig))
    assert out.code == 6, out.stderr
    error = [line for line in out.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1, out.stderr
    assert error[0].startswith(f"Error: logs of pod {NAMESPACE}/r9-0: GET {core.server}/api/v1/namespaces/")
    # what kube-apiserver v1.37 answers for a node without a kubelet: 500, its dial refused
    assert "kept failing: 500 " in error[0] and "/containerLogs/tiny-llm/r9-0/train" in error[0]
    assert "connection refused" in error[0]
    assert error[0].endswith("the API server reads a pod's log from its node's kubelet: is the node reachable?")
    # the retries are said on stderr, before the one error line
    assert out.stderr.splitlines()[-1] == error[0]
