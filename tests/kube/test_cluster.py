"""The simulated cluster itself (tests/kube_cluster.py, scripts/kube-sim.sh): what it starts,
what it listens on, and that `down` stops what `up` started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kube_cluster import GPU, RACK_LABEL, SPINE_LABEL, KubeCluster, _alive, listening

REPO = Path(__file__).resolve().parents[2]


def test_every_component_is_up_and_listens_on_loopback_only(kube_cluster: KubeCluster) -> None:
    names = {p.name for p in kube_cluster.procs}
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} <= names
    assert {"vc-scheduler", "vc-controller-manager", "jobset", "kueue"} <= names
    assert all(_alive(p.pid, p.binary) for p in kube_cluster.procs)
    sockets = listening(p.pid for p in kube_cluster.procs)
    assert sockets, "no listening socket found for the cluster's processes"
    assert {addr for addr, _ in sockets} == {"127.0.0.1"}, sorted(sockets)
    version = kube_cluster.api.request("GET", "/version")
    assert version["gitVersion"] == "v1.37.2"


def test_nodes_have_gpus_and_rack_and_spine_labels(kube_cluster: KubeCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in kube_cluster.api.list("v1", "Node")}
    assert sorted(nodes) == kube_cluster.nodes
    racks = set()
    for node in nodes.values():
        assert node["status"]["allocatable"][GPU] == str(kube_cluster.shape.gpus_per_node)
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert ready["Ready"] == "True"
        racks.add((node["metadata"]["labels"][RACK_LABEL], node["metadata"]["labels"][SPINE_LABEL]))
    assert len(racks) == kube_cluster.shape.racks


def test_kube_sim_up_prints_a_kubeconfig_and_down_stops_every_process(tmp_path: Path) -> None:
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        pytest.skip("TRAINOPS_SKIP_KUBE=1: the simulated Kubernetes cluster is not built here")
    env: dict[str, Any] = {**os.environ, "TRAINOPS_TEST_VENV": str(Path(sys.executable).parents[1])}
    directory = tmp_path / "sim"
    up = subprocess.run(
        [str(REPO / "scripts" / "kube-sim.sh"), "up", "--dir", str(directory), "--nodes", "3", "--racks", "3",
         "--components", "etcd,apiserver,kwok"],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    cluster = KubeCluster.load(directory) if (directory / "cluster.json").exists() else None
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}"
        assert cluster is not None and len(cluster.api.list("v1", "Node")) == 3
        again = subprocess.run(
            [str(REPO / "scripts" / "kube-sim.sh"), "up", "--dir", str(directory)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert again.returncode == 1 and "already running" in again.stderr
        down = subprocess.run(
            [str(REPO / "scripts" / "kube-sim.sh"), "down", "--dir", str(directory)],
            capture_output=True, text=True, env=env, check=False, timeout=120,
        )  # fmt: skip
        assert down.returncode == 0, down.stderr
        assert not any(_alive(p.pid, p.binary) for p in cluster.procs)
    finally:
        if cluster is not None:
            cluster.stop()
