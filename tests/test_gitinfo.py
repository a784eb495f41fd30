"""git_state on real repositories: commit, -dirty, remote without credentials."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trainops.gitinfo import git_state


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def test_clean_dirty_and_outside(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("1")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-qm", "one")
    sha = _git(repo, "rev-parse", "HEAD")
    state = git_state(repo)
    assert state is not None and state.commit == sha and state.commit_time > 0 and state.remote is None
    (repo / "a.txt").write_text("2")
    assert git_state(repo).commit == sha + "-dirty"  # type: ignore[union-attr]
    (repo / "sub").mkdir()
    assert git_state(repo / "sub").commit == sha + "-dirty"  # type: ignore[union-attr]
    _git(repo, "remote", "add", "origin", "https://user:ghp_secret@github.example/org/repo.git")
    assert git_state(repo).remote == "https://github.example/org/repo.git"  # type: ignore[union-attr]
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_state(outside) is None
