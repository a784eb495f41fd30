"""history: the audit trail of a GitOps branch, newest first, with parsed trailers.

Commits come out in ``git log --date-order``: a commit is never listed before one built on
it, even when the clocks of the machines that wrote them disagree. Without ``path`` only
the last ``limit`` commits are fetched (``--depth``); with one, the branch's history is
fetched without file contents (``--filter=blob:none`` where the server allows it), since
the commits touching ``path`` may be anywhere in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops import clock
from trainops.errors import InputError, NotFoundError
from trainops.gitops.message import SEPARATORS, parse_lines
from trainops.gitops.paths import check_directory
from trainops.gitops.remote import parse_remote
from trainops.gitops.scratch import Scratch

_RECORD = b"\x1e"
_FIELD = b"\x1f"
_FORMAT = "--format=%x1e%H%x1f%cI%x1f%s%x1f%(trailers:only,unfold)%x1f"


@dataclass(frozen=True)
class HistoryEntry:
    """One commit of the branch."""

    commit: str
    date: str  # committer date, ISO 8601 UTC with Z (trainops.clock)
    subject: str
    trailers: dict[str, str] = field(default_factory=dict)  # a key given twice keeps its last value
    paths: list[str] = field(default_factory=list)  # changed paths (under `path` when one is given)


def history(*, repo: str, branch: str, path: str | None = None, limit: int = 50) -> list[HistoryEntry]:
    """The newest ``limit`` commits of ``branch`` (touching ``path``, if given), newest first.

    ``paths`` lists what each commit changed (renames as a deletion and an addition;
    restricted to ``path`` when one is given); merge commits list none. Raises NotFoundError
    if the repository or the branch does not exist.
    """
    directory = check_directory(path) if path is not None else None
    if not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be at least 1, not {limit!r}")
    remote = parse_remote(repo)
    if remote.local is not None and not remote.local.exists():
        raise NotFoundError(f"GitOps repository {remote.display} does not exist", hint="check spec.gitops.repo")
    with Scratch(remote) as scratch:
        scratch.check_branch(branch)
        # one deeper than shown: the shallow boundary commit would list every file as added
        tip = scratch.fetch_tip(branch, depth=None if directory else limit + 1, trees_only=True)
        if tip is None:
            raise NotFoundError(
                f"branch {branch} does not exist in {remote.display}",
                hint="nothing has been committed there yet; check spec.gitops.branch",
            )
        args = [*SEPARATORS, "log", "--date-order", "--no-renames", "-z", "--name-only", f"--max-count={limit}"]
        args += [_FORMAT, tip]
        if directory:
            args += ["--", directory]
        out = scratch.run(*args, what="read the history").stdout
    return _parse(out)


def _parse(out: bytes) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    current: list[str] | None = None
    for token in out.split(b"\0"):
        if token.startswith(_RECORD):
            fields = token[1:].split(_FIELD)
            text = [f.decode("utf-8", "replace") for f in fields]
            subject = "\x1f".join(text[2:-2])  # a subject holding the separator keeps it
            date = clock.iso(clock.parse(text[1]))
            entry = HistoryEntry(commit=text[0], date=date, subject=subject, trailers=parse_lines(text[-2]))
            current = entry.paths
            entries.append(entry)
        elif token and current is not None:
            name = token[1:] if not current and token.startswith(b"\n") else token
            current.append(name.decode("utf-8", "replace"))
    return entries
