"""The ray target on a cluster without KubeRay (the API server alone: no RayJob CRD):
`validate --kubeconfig` and `train submit --kubeconfig` say which kind is missing and how
to install what brings it, in one line; the submit commits nothing. With the CRDs but no
operator, the API server takes the RayJob and `train status` asks whether KubeRay runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.kube.test_ray import alone, write_project
from trainops_testing.cli import run
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import apply, render_job

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


def _remove_crds(sim: KubeCluster, paths: list[Path]) -> None:
    for path in paths:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        sim.api.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


def test_with_the_crds_but_no_operator_status_asks_whether_kuberay_runs(
    project: Path, sim: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The CRDs alone (an operator uninstalled, or never started): the API server takes the
    RayJob, nothing acts on it, and `train status` says what is missing."""
    crds = sim._crd_files("kuberay", ["config/crd/bases"])
    sim.install_crds(crds)
    request.addfinalizer(lambda: _remove_crds(sim, crds))  # the module's cluster has no KubeRay again
    objects = render_job(tmp_path / "job", run_id="r2", scheduler="ray", namespace="default", queue=None,
                         priorityClass=None, topology=None)  # fmt: skip
    apply(sim.api, objects)
    out = run("train", "status", "r2", "-o", "json", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["phase"] == "Pending" and data["pods"] == []
    assert data["reason"].startswith("KubeRay has not taken the RayJob up (it has no status): is the KubeRay operator")
