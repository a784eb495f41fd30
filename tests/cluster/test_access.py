"""ClusterAccess: the one value naming the cluster a command reads, and how its kubeconfig is found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainops.cluster.access import ClusterAccess


def test_named_is_none_unless_something_was_named() -> None:
    assert ClusterAccess.named(None, None) is None
    assert ClusterAccess.named(None, None, cluster=True) == ClusterAccess()
    assert ClusterAccess.named(None, "kind-a") == ClusterAccess(None, "kind-a")
    assert ClusterAccess.named(Path("/k/config"), None) == ClusterAccess("/k/config", None)


def test_a_given_kubeconfig_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "env"))
    access = ClusterAccess(str(tmp_path / "given"))
    assert access.found == "--kubeconfig" and access.path == tmp_path / "given"


def test_kubeconfig_takes_its_first_existing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "second").write_text("{}")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "first"), str(tmp_path / "second")]))
    assert ClusterAccess().found == "$KUBECONFIG" and ClusterAccess().path == tmp_path / "second"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert ClusterAccess().path == tmp_path / "missing"  # none exists: the first, named in the error


def test_the_users_own_cluster_is_found_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ClusterAccess().found == "~/.kube/config"
    assert ClusterAccess.users_own() is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert ClusterAccess.users_own() == ClusterAccess()
    assert ClusterAccess().path == tmp_path / ".kube" / "config"
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "set-but-absent"))
    assert ClusterAccess.users_own() == ClusterAccess()  # $KUBECONFIG set: the user meant it
