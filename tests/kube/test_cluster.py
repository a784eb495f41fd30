"""The simulated cluster itself (trainops_testing/kube_cluster.py, scripts/kube-sim.sh): what it starts,
what it listens on, that kwok runs and finishes pods, and that `down` stops what `up` started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainops_testing.kube_bins import versions
from trainops_testing.kube_cluster import (
    EXIT_ANNOTATION,
    GPU,
    RACK_LABEL,
    SPINE_LABEL,
    KubeCluster,
    Shape,
    _alive,
    listening,
)
from trainops_testing.kube_jobs import ensure_namespace
from trainops_testing.services import MissingDependency, wait_for

REPO = Path(__file__).resolve().parents[2]
CORE = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")


@pytest.fixture(scope="module")
def core(kube_cluster_factory: Any) -> Any:
    cluster = kube_cluster_factory(shape=Shape(nodes=4, gpus_per_node=8, racks=2, spines=1), components=CORE)
    yield cluster
    cluster.stop()


def test_the_control_plane_listens_on_loopback_only(core: KubeCluster) -> None:
    names = {p.name for p in core.procs}
    assert names == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert all(_alive(p.pid, p.binary) for p in core.procs)
    sockets = listening(p.pid for p in core.procs)
    assert len(sockets) >= len(names), sorted(sockets)  # etcd's two, the API server, health ports
    assert {addr for addr, _ in sockets} == {"127.0.0.1"}, sorted(sockets)
    assert core.api.request("GET", "/version")["gitVersion"] == "v1.37.2"


def test_nodes_have_gpus_and_rack_and_spine_labels(core: KubeCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in core.api.list("v1", "Node")}
    assert sorted(nodes) == core.nodes
    domains = set()
    for node in nodes.values():
        assert node["status"]["allocatable"][GPU] == "8"
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
        labels = node["metadata"]["labels"]
        domains.add((labels[RACK_LABEL], labels[SPINE_LABEL]))
    assert domains == {("rack-0", "spine-0"), ("rack-1", "spine-0")}


def test_a_pod_is_scheduled_runs_and_finishes_when_told(core: KubeCluster) -> None:
    ensure_namespace(core.api, "smoke")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu", "namespace": "smoke"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "none", "resources": {"limits": {GPU: "8"}}}],
        },
    }
    core.api.apply(pod)

    def phase() -> str:
        return str(core.api.get("v1", "Pod", "gpu", "smoke")["status"].get("phase"))

    wait_for(lambda: phase() == "Running", timeout=60, what="pod Running on a kwok node")
    assert core.api.get("v1", "Pod", "gpu", "smoke")["spec"]["nodeName"] in core.nodes
    core.api.merge_patch("v1", "Pod", "gpu", {"metadata": {"annotations": {EXIT_ANNOTATION: "3"}}}, "smoke")
    wait_for(lambda: phase() == "Failed", timeout=60, what="pod Failed with exit code 3")
    status = core.api.get("v1", "Pod", "gpu", "smoke")["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["exitCode"] == 3


def test_kube_sim_up_prints_a_kubeconfig_and_down_stops_every_process(tmp_path: Path) -> None:
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        pytest.skip("TRAINOPS_SKIP_KUBE=1: the simulated Kubernetes cluster is not built here")
    env: dict[str, Any] = {**os.environ, "TRAINOPS_TEST_VENV": str(Path(sys.executable).parents[1])}
    directory = tmp_path / "sim"
    script = str(REPO / "scripts" / "kube-sim.sh")
    up = subprocess.run(
        [script, "up", "--dir", str(directory), "--nodes", "3", "--racks", "3", "--components", "etcd,apiserver,kwok"],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    cluster = KubeCluster.load(directory) if (directory / "cluster.json").exists() else None
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}"
        assert cluster is not None and len(cluster.api.list("v1", "Node")) == 3
        again = subprocess.run([script, "up", "--dir", str(directory)], capture_output=True, text=True, env=env)
        assert again.returncode == 1 and "already running" in again.stderr
        down = subprocess.run([script, "down", "--dir", str(directory)], capture_output=True, text=True, env=env)
        assert down.returncode == 0, down.stderr
        assert not any(_alive(p.pid, p.binary) for p in cluster.procs)
    finally:
        if cluster is not None:
            cluster.stop()


def test_kube_sim_up_after_down_in_the_same_directory_starts_fresh(tmp_path: Path) -> None:
    """`down` keeps etcd's data (and says so); `up` in that directory again starts a fresh
    cluster, saying so, instead of failing on the nodes the old data still holds."""
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        pytest.skip("TRAINOPS_SKIP_KUBE=1: the simulated Kubernetes cluster is not built here")
    env: dict[str, Any] = {**os.environ, "TRAINOPS_TEST_VENV": str(Path(sys.executable).parents[1])}
    directory = tmp_path / "sim"
    script = str(REPO / "scripts" / "kube-sim.sh")
    up = [script, "up", "--dir", str(directory), "--nodes", "2", "--racks", "1", "--components", "etcd,apiserver,kwok"]
    down = [script, "down", "--dir", str(directory)]
    clusters = []
    try:
        for attempt in range(2):
            started = subprocess.run(up, capture_output=True, text=True, env=env, check=False, timeout=300)
            clusters.append(KubeCluster.load(directory))
            assert started.returncode == 0, started.stderr
            assert ("starting fresh (its etcd data removed)" in started.stderr) == (attempt == 1), started.stderr
            api = clusters[-1].api
            assert sorted(n["metadata"]["name"] for n in api.list("v1", "Node")) == ["gpu-0000", "gpu-0001"]
            if attempt == 0:  # something of the first cluster's that the second must not have
                api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "from-the-first-up"}})
            else:
                assert "from-the-first-up" not in {n["metadata"]["name"] for n in api.list("v1", "Namespace")}
            stopped = subprocess.run(down, capture_output=True, text=True, env=env, check=False)
            assert stopped.returncode == 0, stopped.stderr
            assert "(3 of 3 processes were running); left there: etcd's data" in stopped.stderr
            assert (directory / "etcd").is_dir()
    finally:
        for cluster in clusters:
            cluster.stop()


def test_a_missing_binary_fails_naming_the_command_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    monkeypatch.setenv("TRAINOPS_KUBE_CACHE", str(cache))
    cluster = KubeCluster(tmp_path / "c", components=("etcd", "apiserver", "kwok", "volcano"))
    with pytest.raises(MissingDependency) as err:
        cluster.start()
    assert str(err.value) == (
        f"{cache}/bin/etcd-{versions()['ETCD_VERSION']} not found: run `scripts/kube_components.py etcd` as root "
        "(TRAINOPS_KUBE_PREBUILT=<directory of prebuilt archives>, else it builds from source; "
        "or set TRAINOPS_SKIP_KUBE=1 to skip cluster tests)"
    )
    assert cluster.procs == []  # nothing started
