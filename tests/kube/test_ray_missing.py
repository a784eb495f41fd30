"""The ray target on a cluster without KubeRay (the API server alone: no RayJob CRD):
`validate --kubeconfig` and `train submit --kubeconfig` say which kind is missing and how
to install what brings it, in one line; the submit commits nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.runner import run
from tests.kube.test_ray import alone, write_project
from trainops_testing.kube_cluster import KubeCluster, Shape

SHAPE = Shape(nodes=1, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver")
IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
INSTALL = "install the KubeRay operator, which brings the RayJob and RayCluster CRDs and runs them"
HELM = "helm install kuberay-operator kuberay/kuberay-operator --version 1.5.0"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster) -> Path:
    root = write_project(tmp_path, monkeypatch, git_remote, namespace="default")
    alone(root)
    return root


def test_validate_names_the_missing_rayjob_and_how_to_install_kuberay(project: Path, sim: KubeCluster) -> None:
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3
    (line,) = [line for line in out.stderr.splitlines() if "RayJob" in line]
    assert "spec.train" in line and f"does not serve ray.io/v1 RayJob; {INSTALL}" in line and HELM in line, line


def test_submit_names_it_too_and_commits_nothing(project: Path, git_remote: Path, sim: KubeCluster) -> None:
    out = run("train", "submit", "--image", IMAGE, "--run-id", "r1", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 4, out.stderr
    assert out.last_error_line.startswith(f"Error: the cluster at {sim.server} does not serve ray.io/v1 RayJob; ")
    assert INSTALL in out.last_error_line and HELM in out.last_error_line
    refs = subprocess.run(["git", "--git-dir", str(git_remote), "for-each-ref"], capture_output=True, text=True)
    assert refs.returncode == 0 and refs.stdout == ""  # nothing pushed
