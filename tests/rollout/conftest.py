"""Fixtures for the serving tests: an isolated git environment and a project with model releases
(trainops_testing.projects.make_project)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops_testing.projects import Project, make_project
from trainops_testing.services import git_env


@pytest.fixture(autouse=True)
def _git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)  # no cluster here: promote must not read the caller's


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")
