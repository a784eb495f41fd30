"""Fixtures for the GitOps tests: an isolated git environment and a watched temp root.

Every test runs with no user or system git config and a fixed identity (``git_env``), and
with ``tempfile`` pointed at a directory of its own; after the test that directory must
hold no scratch repository, whether the test's writes succeeded or failed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops.gitops.scratch import TEMP_PREFIX
from trainops_testing.services import git_env


@pytest.fixture(autouse=True)
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temp directory trainops uses in this test; checked to be left empty of scratch dirs."""
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    left = sorted(p.name for p in root.iterdir() if p.name.startswith(TEMP_PREFIX))
    assert not left, f"scratch directories left behind: {left}"
