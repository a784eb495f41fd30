"""What git says about a working tree: the commit (with -dirty) and its time, for lineage.

This runs the git CLI directly (three quick calls) rather than importing GitPython: it is
on the path of every `trainops push`, whose start-up time matters.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitState:
    commit: str  # 40 hex, with "-dirty" when the tree has uncommitted changes
    commit_time: int  # seconds since the epoch
    remote: str | None


def _git(path: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(path: Path) -> GitState | None:
    """The state of the git repository containing path, or None outside one (or without git)."""
    head = _git(path, "log", "-1", "--format=%H %ct")
    if not head:
        return None
    sha, _, stamp = head.partition(" ")
    dirty = _git(path, "status", "--porcelain", "--untracked-files=no")
    remote = _git(path, "config", "--get", "remote.origin.url")
    commit = sha + ("-dirty" if dirty else "")
    return GitState(commit=commit, commit_time=int(stamp or 0), remote=_strip_credentials(remote or None))


def _strip_credentials(url: str | None) -> str | None:
    """https://user:token@host/x → https://host/x: lineage never carries secrets."""
    if url is None or "://" not in url or "@" not in url.split("://", 1)[1].split("/", 1)[0]:
        return url
    scheme, rest = url.split("://", 1)
    host_part, _, path = rest.partition("/")
    return f"{scheme}://{host_part.rsplit('@', 1)[1]}/{path}"


def git_user(path: Path) -> str | None:
    """`user.name <user.email>` of git's configuration at path (either part alone if only
    one is set), or None when git has neither."""
    name = _git(path, "config", "--get", "user.name") or ""
    email = _git(path, "config", "--get", "user.email") or ""
    if name and email:
        return f"{name} <{email}>"
    return name or email or None


def in_repository(path: Path) -> bool:
    """Whether path is inside a git working tree (or a bare repository)."""
    return _git(path, "rev-parse", "--git-dir") is not None


def resolve_commit(path: Path, rev: str) -> str | None:
    """The full sha of the commit rev names (a sha, its prefix, HEAD, a branch or tag) in the
    git repository containing path; None outside one, or when git does not know rev there.
    rev must not start with '-' (callers check it: it would be read as an option)."""
    return _git(path, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
