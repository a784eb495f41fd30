"""Helpers for the GitOps tests: run git as a user would, and play the other writers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(*args: str, cwd: Path | None = None, input: str | None = None, check: bool = True) -> str:
    """Run git with the test environment; its stdout, stripped."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, input=input, env=dict(os.environ), check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout.strip()


def clone(remote: Path, dest: Path, branch: str = "main") -> Path:
    git("clone", "--quiet", "--branch", branch, str(remote), str(dest))
    return dest


def tip(remote: Path, branch: str = "main") -> str | None:
    out = git("--git-dir", str(remote), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    return out or None


def commit_as_someone_else(remote: Path, work: Path, files: dict[str, str], message: str) -> str:
    """Clone, write ``files`` (relative to the repo root), commit and push: another writer."""
    if not work.exists():
        git("clone", "--quiet", str(remote), str(work))
        git("symbolic-ref", "HEAD", "refs/heads/main", cwd=work)  # an empty clone's HEAD is git's default
    else:
        git("pull", "--quiet", "--ff-only", cwd=work)
    for name, text in files.items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        git("add", name, cwd=work)
    git("commit", "--quiet", "-m", message, cwd=work)
    git("push", "--quiet", "origin", "HEAD:main", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


def hook(remote: Path, name: str, script: str) -> None:
    path = remote / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
