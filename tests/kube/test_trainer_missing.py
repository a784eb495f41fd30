"""The kubeflow target on a cluster without Kubeflow Trainer (the API server alone), then with
its CRDs but not its controller: `validate --kubeconfig` and `train submit --kubeconfig` say
which is missing and how to install the Trainer, in one line at train.scheduler; the submit
commits nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.kube.test_trainer import IMAGE, write_project
from trainops_testing.cli import run
from trainops_testing.kube_bins import upstream
from trainops_testing.kube_cluster import KubeCluster, Shape

SHAPE = Shape(nodes=1, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver")
INSTALL = "install Kubeflow Trainer v2, which brings the TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs"
KUSTOMIZE = (
    "kubectl apply --server-side -k 'https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0'"
)


def _nothing_pushed(git_remote: Path) -> None:
    refs = subprocess.run(["git", "--git-dir", str(git_remote), "for-each-ref"], capture_output=True, text=True)
    assert refs.returncode == 0 and refs.stdout == ""


def test_validate_and_submit_name_the_missing_trainer_then_its_missing_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster
) -> None:
    write_project(tmp_path, monkeypatch, git_remote, namespace="default")
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3
    (line,) = [line for line in out.stderr.splitlines() if "trainer.kubeflow.org" in line]
    assert ": spec.train.scheduler: the cluster at " in line and "does not serve trainer.kubeflow.org/v1alpha1 " in line
    assert INSTALL in line and KUSTOMIZE in line, line

    out = run("train", "submit", "--image", IMAGE, "--run-id", "r1", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 4, out.stderr
    assert out.last_error_line.startswith(f"Error: the cluster at {sim.server} does not serve {'trainer.kubeflow.org'}")
    assert INSTALL in out.last_error_line and KUSTOMIZE in out.last_error_line
    _nothing_pushed(git_remote)

    # the CRDs alone, as `kubectl apply` of manifests/base/crds would leave them: no controller
    sim.install_crds(sorted((upstream("trainer") / "manifests/base/crds").glob("trainer.kubeflow.org_*.yaml")))
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3
    (line,) = [line for line in out.stderr.splitlines() if "trainer.kubeflow.org" in line]
    assert ": spec.train.scheduler: " in line and "serves trainer.kubeflow.org/v1alpha1 TrainJob but runs no " in line
    assert "Kubeflow Trainer controller" in line and KUSTOMIZE in line, line
    out = run("train", "submit", "--image", IMAGE, "--run-id", "r1", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3 and "runs no Kubeflow Trainer controller" in out.stderr, out.stderr
    _nothing_pushed(git_remote)
