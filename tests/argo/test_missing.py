"""A kubeconfig whose cluster lacks Argo CD or Argo Rollouts: `rollout status` names what is
missing and still shows what the GitOps repo serves.

A bare control plane (etcd and the API server, no controllers): first with neither kind
served, then with Argo Rollouts' CRDs installed and Argo CD's still absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainops_testing.argo_cluster import upstream_crds
from trainops_testing.argo_live import serving_project, start_args
from trainops_testing.cli import run


def test_status_names_the_missing_controllers_and_shows_the_repo(kube_cluster_factory: Any, tmp_path: Path) -> None:
    cluster = kube_cluster_factory(components=("etcd", "apiserver"))
    try:
        project = serving_project(tmp_path / "project", "file://gitops.git")
        assert run(*project.cli(*start_args("v1"))).code == 0
        status = ("rollout", "status", "--kubeconfig", str(cluster.kubeconfig))

        text = run(*project.cli(*status))
        assert text.code == 0, text.stderr
        assert "stable:  v1" in text.stdout
        assert "missing: Argo CD (the cluster does not serve argoproj.io/v1alpha1 Application)" in text.stdout
        assert "missing: Argo Rollouts (the cluster does not serve argoproj.io/v1alpha1 Rollout)" in text.stdout

        cluster.install_crds(upstream_crds("rollouts"))  # waits Established
        data = json.loads(run(*project.cli(*status, "-o", "json")).stdout)
        assert data["stable"]["version"] == "v1" and data["canary"] is None
        assert [m.split(" (")[0] for m in data["live"]["missing"]] == ["Argo CD"]
        assert data["live"]["rollout"] is None  # Rollouts' kind is served; git's Rollout is not synced
        again = run(*project.cli(*status))
        assert "missing: Argo CD" in again.stdout and "missing: Argo Rollouts" not in again.stdout
        assert "rollout: not in the cluster (yet)" not in again.stdout  # said only when nothing is missing
    finally:
        cluster.stop()
