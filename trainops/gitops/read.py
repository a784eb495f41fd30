"""read_tree: the files under a directory of a GitOps branch, at its tip or at an earlier commit.

What a tree held is read byte for byte (``git cat-file``, no filters), so a caller can
write exactly those bytes back (a rollback to the tree that served before).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops.errors import InputError, NotFoundError
from trainops.gitops.paths import check_directory
from trainops.gitops.remote import parse_remote
from trainops.gitops.scratch import Scratch

_COMMIT_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class TreeSnapshot:
    """The files under ``path`` at ``commit`` (None: the branch has no commit yet)."""

    commit: str | None
    files: dict[str, bytes] = field(default_factory=dict)  # relative to path


def files_at(scratch: Scratch, commit: str, directory: str) -> dict[str, bytes]:
    """Every file under ``directory`` in ``commit`` of the scratch repository, relative to it."""
    listing = scratch.run("ls-tree", "-r", "-z", commit, "--", directory, what="list the tree").stdout
    out: dict[str, bytes] = {}
    prefix = directory + "/"
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        kind, sha = meta.decode().split(" ")[1:3]
        name = raw.decode("utf-8", "surrogateescape")
        if kind != "blob" or not name.startswith(prefix):
            continue
        out[name[len(prefix) :]] = scratch.run("cat-file", "blob", sha, what="read a file").stdout
    return out


def read_tree(*, repo: str, branch: str, path: str, commit: str | None = None) -> TreeSnapshot:
    """The files under ``path`` at the tip of ``branch``, or at ``commit`` (which must be on it).

    Raises NotFoundError when the repository does not exist or ``commit`` is not on the branch.
    """
    directory = check_directory(path)
    if commit is not None and (not 7 <= len(commit) <= 64 or not set(commit) <= _COMMIT_CHARS):
        raise InputError(f"{commit!r} is not a commit id", hint="give a hex commit sha")
    remote = parse_remote(repo)
    if remote.local is not None and not remote.local.exists():
        raise NotFoundError(f"GitOps repository {remote.display} does not exist", hint="check spec.gitops.repo")
    with Scratch(remote) as scratch:
        scratch.check_branch(branch)
        tip = scratch.fetch_tip(branch, depth=1 if commit is None else None)
        if tip is None:
            if commit is not None:
                raise NotFoundError(f"branch {branch} of {remote.display} has no commits")
            return TreeSnapshot(None, {})
        target = tip
        if commit is not None:
            found = scratch.run("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", what="", check=False)
            merged = scratch.run("merge-base", "--is-ancestor", found.text or commit, tip, what="", check=False)
            if found.status != 0 or merged.status != 0:
                raise NotFoundError(f"commit {commit} is not on {branch} of {remote.display}")
            target = found.text
        return TreeSnapshot(target, files_at(scratch, target, directory))
