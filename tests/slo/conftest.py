"""Fixtures of the SLO tests: git identity and HOME of their own (the serving tests' projects)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops_testing.services import git_env


@pytest.fixture(autouse=True)
def _git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)  # no cluster: promote --auto measures itself
