"""What git says about a working tree: the commit (with -dirty) and its time, for lineage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitState:
    commit: str  # 40 hex, with "-dirty" when the tree has uncommitted changes
    commit_time: int  # seconds since the epoch
    remote: str | None


def git_state(path: Path) -> GitState | None:
    """The state of the git repository containing path, or None outside one."""
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
        head = repo.head.commit
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None
    try:
        dirty = repo.is_dirty(untracked_files=False)
        remote = next((r.url for r in repo.remotes), None)
    finally:
        repo.close()
    commit = head.hexsha + ("-dirty" if dirty else "")
    return GitState(commit=commit, commit_time=int(head.committed_date), remote=_strip_credentials(remote))


def _strip_credentials(url: str | None) -> str | None:
    """https://user:token@host/x → https://host/x: lineage never carries secrets."""
    if url is None or "://" not in url or "@" not in url.split("://", 1)[1].split("/", 1)[0]:
        return url
    scheme, rest = url.split("://", 1)
    host_part, _, path = rest.partition("/")
    return f"{scheme}://{host_part.rsplit('@', 1)[1]}/{path}"
