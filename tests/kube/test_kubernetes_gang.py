"""The kubernetes target: Kubernetes 1.37's own gang scheduling (the Workload API) with the
default scheduler, no Volcano or Kueue. The simulated cluster runs its API server,
controller-manager and scheduler with the GenericWorkload gate and scheduling.k8s.io/v1beta1
served (CLUSTER_OPTIONS: not the other tests' clusters). A 4-node gang on 3 free nodes binds
none of its pods; a 4th node joins and all 4 bind, on 4 nodes. The run goes through git
(submit, the stand-in for Argo CD, cancel) and is read through trainops.train (status,
watch, logs) as every Kubernetes run is. An API server without the Workload API is named
with the flags it needs, and nothing is committed."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.test_train_cli import enter_project
from tests.cluster.test_reads import _sync, _wait
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops_testing.cli import run
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=3, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
CLUSTER_OPTIONS = {"workload_api": True}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
GANG = "scheduling.k8s.io/v1beta1"


def write_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, namespace: str) -> Path:
    """tiny-llm on the kubernetes target, 4 nodes × 8 GPUs, in ``namespace``: no queue, tenants,
    patches, SLOs, environments or serving (a cluster of the core components only)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    spec["gitops"]["repo"] = f"file://{git_remote}"
    spec["gitops"].pop("argocd", None)
    spec["registry"] = f"file://{tmp_path / 'registry'}"
    spec["train"].update(
        scheduler="kubernetes",
        queue=None,
        priorityClass=None,
        topology=None,
        nodes=4,
        namespace=namespace,
        faultTolerance={"maxRetry": 0},
    )
    spec["tenants"] = []
    spec["patches"] = []
    spec.pop("slo", None)
    spec.pop("rollout", None)
    doc.pop("environments", None)
    return enter_project(tmp_path, monkeypatch, doc)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster) -> Iterator[Path]:
    namespace = f"gang-{uuid.uuid4().hex[:6]}"
    sim.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    root = write_project(tmp_path, monkeypatch, git_remote, namespace)
    monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))
    yield root
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        cluster.delete("v1", "Namespace", namespace)


def _bound(sim: KubeCluster, namespace: str) -> list[str]:
    pods = sim.api.list("v1", "Pod", namespace)
    return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]


def test_a_gang_larger_than_the_free_nodes_binds_none_then_all_once_a_node_joins(
    project: Path, git_remote: Path, sim: KubeCluster
) -> None:
    namespace = yaml.safe_load((project / "trainops.yaml").read_text())["spec"]["train"]["namespace"]
    # validate --kubeconfig: the gang is larger than the cluster, said at train.nodes
    checked = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert checked.code != 0
    (line,) = [x for x in (checked.stdout + checked.stderr).splitlines() if "spec.train.nodes" in x]
    assert "a gang of 4 pods, each asking" in line and "8 nvidia.com/gpu" in line
    assert "3 of the cluster's 3 nodes can hold one" in line and "set nodes to at most 3" in line

    assert run("train", "submit", "--image", IMAGE, "--run-id", "g1", "--kubeconfig", str(sim.kubeconfig)).code == 0
    synced = _sync(git_remote, sim)
    assert sorted(a.split(" ")[0] for a in synced.applied) == ["Job", "PodGroup", "Service", "Workload"]

    state = _wait(project, "g1", lambda s: len(s.pods) == 4 and s.reason is not None)
    # several scheduling cycles: none of the 4 pods may be bound, though 3 nodes are free
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert _bound(sim, namespace) == [], "a pod of the gang was bound with only 3 nodes free"
        time.sleep(0.2)  # pacing: the condition is "stays so", checked throughout
    assert state.phase in ("Pending", "Running")  # the Job is active; its pods are not placed
    status = run("train", "status", "g1")
    assert status.code == 0, status.stderr
    assert "minCount (4) cannot be satisfied" in status.stdout, status.stdout

    sim.add_nodes([3])
    try:
        wait_for(lambda: len(_bound(sim, namespace)) == 4, timeout=60, what="all 4 pods bound", interval=0.2)
        assert len(set(_bound(sim, namespace))) == 4
        running = _wait(project, "g1", lambda s: s.phase == "Running" and all(p.phase == "Running" for p in s.pods))
        assert running.kind == "batch/v1 Job" and running.reason is None
        watched = run("train", "watch", "g1", "--once")
        assert watched.code == 0, watched.stderr
        logs = run("train", "logs", "g1")
        # kwok nodes have no kubelet: the error names the run's first pod, read through trainops.train
        first = sorted(p.name for p in running.pods)[0]
        assert logs.code == 6 and f"logs of pod {namespace}/{first}" in logs.stderr, logs.stderr

        cancelled = run("train", "cancel", "g1")
        assert cancelled.code == 0, cancelled.stderr
        pruned = _sync(git_remote, sim).pruned
        assert sorted(p.split(" ")[0] for p in pruned) == ["Job", "PodGroup", "Service", "Workload"]
    finally:
        sim.api.delete("v1", "Node", sim.shape.node_name(3))


def test_an_api_server_without_the_workload_api_is_named_with_its_flags_and_nothing_is_committed(
    kube_cluster_factory: Callable[..., KubeCluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    git_remote: Path,
) -> None:
    bare = kube_cluster_factory(shape=Shape(nodes=1, racks=1), components=("etcd", "apiserver"))
    try:
        write_project(tmp_path, monkeypatch, git_remote, "gang-off")
        out = run("train", "submit", "--image", IMAGE, "--run-id", "g2", "--kubeconfig", str(bare.kubeconfig))
        assert out.code != 0
        line = out.last_error_line
        assert f"does not serve {GANG} Workload" in line, line
        assert (
            "--feature-gates=GenericWorkload=true" in line and "--runtime-config=scheduling.k8s.io/v1beta1=true" in line
        )
        heads = subprocess.run(["git", "-C", str(git_remote), "rev-list", "--all"], capture_output=True, text=True)
        assert heads.stdout == ""  # nothing committed

        bare.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gang-off"}})
        checked = run("validate", "--render", "--kubeconfig", str(bare.kubeconfig))
        assert checked.code != 0
        text = checked.stdout + checked.stderr
        assert f"does not serve {GANG} Workload" in text and "GenericWorkload=true" in text, text
    finally:
        bare.stop()
