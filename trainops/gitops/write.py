"""write_tree: make one directory of the GitOps repository hold exactly the rendered files.

One call is one commit on one branch, pushed, or nothing at all:

1. Everything given is checked first (paths, trailers, author, branch name); a hostile
   path is refused before any repository is created, fetched or written.
2. A scratch bare repository fetches only the branch tip (``--depth=1``).
3. A private index is loaded with that tip's tree; every entry under ``path`` that is not
   in ``files`` is dropped, every file in ``files`` is staged as given (bytes as-is: no
   filters, no line-ending conversion; mode 100644, or 100755 for the names in
   ``executable``). Nothing outside ``path`` is touched.
4. If the resulting tree equals the tip's, nothing is committed or pushed.
5. Otherwise one commit (parent: the tip) is pushed with a plain, non-forced push.
6. If the push is refused because the branch moved, step 2 onwards runs again on the new
   tip. Since ``path`` belongs to trainops, re-applying the files on the new tip is the
   rebase: other writers' changes outside ``path`` are kept, and if another writer changed
   files under ``path`` meanwhile, this call's files win (and its stale ones are removed).
   After ``max_attempts`` pushes the call gives up with ``RemoteError``.

Any other refusal (a hook, permissions, a protected branch) is reported at once with git's
reason; the remote is unchanged, since a refused push updates no ref.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainops.errors import ExistsError, InputError, NotFoundError, RemoteError, TrainopsError
from trainops.gitops import message as msg
from trainops.gitops.paths import check_directory, check_files
from trainops.gitops.read import files_at
from trainops.gitops.remote import Remote, parse_remote
from trainops.gitops.scratch import Scratch
from trainops.retry import Backoff, RetryPolicy

_REGULAR = "100644"
_EXECUTABLE = "100755"
_ZERO = "0" * 40


@dataclass(frozen=True)
class CommitResult:
    """What write_tree did."""

    repo: str  # URL as given, with any credentials redacted
    branch: str
    path: str
    commit: str | None  # sha of the new commit; None when nothing changed
    changed: bool
    attempts: int  # pushes tried
    files: list[str] = field(default_factory=list)  # paths written (relative to the repo root), sorted
    removed: list[str] = field(default_factory=list)  # paths deleted under `path`, sorted
    stale: bool = False  # the guard refused the branch tip: nothing was committed


@dataclass(frozen=True)
class _Staged:
    tree: str | None  # None: the tree is the base's own
    removed: list[str]


def write_tree(
    *,
    repo: str,
    branch: str,
    path: str,
    files: Mapping[str, str | bytes],
    message: str,
    trailers: Mapping[str, str] | None = None,
    create: bool = False,
    max_attempts: int = 5,
    author: tuple[str, str] | None = None,
    executable: Collection[str] = (),
    guard: Callable[[Mapping[str, bytes]], bool] | None = None,
) -> CommitResult:
    """Commit ``files`` as the whole content of ``path`` on ``branch`` of ``repo`` and push it.

    ``files`` maps names relative to ``path`` to their content (str is UTF-8 encoded);
    the names in ``executable`` (a subset of them) get mode 100755, the others 100644.
    ``message`` is the subject (and body); ``trailers`` are appended as ``Key: value``
    lines that ``git interpret-trailers --parse`` and ``history`` read back. With
    ``create``, a local ``repo`` that does not exist is initialized bare with ``branch`` as
    HEAD. The author is ``author`` (also used as committer), else git's configured
    identity, else ``trainops <trainops@localhost>``.

    If another writer pushed first, the files are re-applied on the new tip and pushed
    again, up to ``max_attempts`` pushes with jittered backoff. Files under ``path`` that
    another writer changed in between are overwritten by these: ``path`` is trainops's.
    With ``guard``, each tip is checked first: it gets the files under ``path`` at the tip
    (relative to it) and returns whether these files still apply there; if not, nothing is
    committed and the result says ``stale`` (a concurrent writer already made the change
    these files were computed for).

    Raises InputError for bad arguments, NotFoundError for a missing repository,
    ExistsError when a file outside ``path`` stands where a directory of ``path`` must be,
    RemoteError when the push is refused or the branch keeps moving.
    """
    directory = check_directory(path)
    contents = check_files(directory, files)
    strays = sorted(set(executable) - set(files))
    if strays:
        raise InputError(f"executable names {strays[0]!r}, which is not among the files", hint="list files only")
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise InputError(f"max_attempts must be at least 1, not {max_attempts!r}")
    commit = _Commit(
        text=msg.check_message(message),
        trailers=msg.check_trailers(trailers),
        author=msg.check_author(author),
        modes={f"{directory}/{name}": _EXECUTABLE for name in executable},
    )
    remote = parse_remote(repo)
    with Scratch(remote) as scratch:
        scratch.check_branch(branch)
        blobs = _hash_blobs(scratch, contents)
        if remote.local is not None:
            _ensure_local(scratch, remote, remote.local, branch, create)
        target = _Target(remote, branch, directory, blobs)
        return _commit_and_push(scratch, target, commit, guard=guard, max_attempts=max_attempts)


@dataclass(frozen=True)
class _Commit:
    """What each attempt commits: the message, its trailers, the author, the file modes."""

    text: str
    trailers: list[tuple[str, str]]
    author: tuple[str, str] | None
    modes: dict[str, str]


@dataclass(frozen=True)
class _Target:
    """Where the files go: the remote, its branch, the directory, and the blobs to put there."""

    remote: Remote
    branch: str
    directory: str
    blobs: dict[str, str]

    def result(self, commit: str | None, attempts: int, removed: list[str], *, stale: bool = False) -> CommitResult:
        return CommitResult(
            repo=self.remote.display,
            branch=self.branch,
            path=self.directory,
            commit=commit,
            changed=commit is not None,
            attempts=attempts,
            files=sorted(self.blobs),
            removed=removed,
            stale=stale,
        )


def _commit_and_push(
    scratch: Scratch,
    target: _Target,
    commit: _Commit,
    *,
    guard: Callable[[Mapping[str, bytes]], bool] | None,
    max_attempts: int,
) -> CommitResult:
    """Stage the files on the branch tip, commit, push; on a lost race, again on the new tip."""
    message_file = msg.compose(scratch, commit.text, commit.trailers)
    env = msg.identity(scratch, commit.author)
    branch, display = target.branch, target.remote.display
    attempts = 0
    backoff = Backoff(
        f"push to {branch} of {display}", policy=RetryPolicy(attempts=max_attempts, base=0.1, cap=5.0, jitter=1.0)
    )
    while True:
        base = scratch.fetch_tip(branch)
        if guard is not None and not guard(files_at(scratch, base, target.directory) if base else {}):
            return target.result(None, attempts, [], stale=True)
        staged = _stage(scratch, base, target.directory, target.blobs, branch, commit.modes)
        if staged.tree is None:
            return target.result(None, attempts, [])
        args = ["commit-tree", staged.tree, *(["-p", base] if base else []), "-F", str(message_file)]
        made = scratch.run(*args, env=env, what="create the commit").text
        attempts += 1
        if scratch.push(made, branch, base):
            return target.result(made, attempts, staged.removed)
        if not backoff.wait("another writer pushed first; re-applying on the new tip"):
            raise RemoteError(
                f"{branch} of {display} kept moving: {attempts} pushes were each beaten by another writer",
                hint="retry in a moment, or allow more attempts if many writers share the branch",
            )


def _ensure_local(scratch: Scratch, remote: Remote, directory: Path, branch: str, create: bool) -> None:
    """A local remote must exist; with ``create`` a missing (or empty) one is initialized."""
    missing = not directory.exists() or (directory.is_dir() and not any(directory.iterdir()))
    if not missing:
        return
    if not create:
        raise NotFoundError(
            f"GitOps repository {remote.display} does not exist (or is an empty directory)",
            hint=f"create it with `git init --bare {directory}` or fix spec.gitops.repo",
        )
    directory.mkdir(parents=True, exist_ok=True)
    scratch.init_bare(directory, what=f"create {directory}")
    head_env = scratch.environment_for(directory)
    scratch.run("symbolic-ref", "HEAD", f"refs/heads/{branch}", env=head_env, what=f"set HEAD of {directory}")


def _hash_blobs(scratch: Scratch, contents: Mapping[str, bytes]) -> dict[str, str]:
    """Write each content as a blob (as-is, no filters); ``{path: blob id}``."""
    if not contents:
        return {}
    names = sorted(contents)
    sources = [scratch.write_temp(contents[name]) for name in names]
    listing = scratch.write_temp("".join(f"{p}\n" for p in sources).encode())
    out = scratch.run("hash-object", "-w", "--no-filters", "--stdin-paths", stdin=listing, what="store the files")
    ids = out.text.split()
    if len(ids) != len(names):
        raise TrainopsError(f"internal error: git stored {len(ids)} of {len(names)} files")
    return dict(zip(names, ids, strict=True))


def _stage(
    scratch: Scratch,
    base: str | None,
    directory: str,
    blobs: Mapping[str, str],
    branch: str,
    modes: Mapping[str, str],
) -> _Staged:
    """Load ``base`` into the private index and make ``directory`` hold exactly ``blobs``
    (each with its mode in ``modes``, else 100644)."""
    (scratch.root / "index").unlink(missing_ok=True)
    if base is None:
        scratch.run("read-tree", "--empty", what="prepare the index")
    else:
        scratch.run("read-tree", base, what="read the branch tip")
    listing = scratch.run("ls-files", "-z", "--stage", what="list the branch tip").stdout
    existing: dict[str, tuple[str, str]] = {}
    prefix = directory + "/"
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        name = raw.decode("utf-8", "surrogateescape")
        if name == directory or directory.startswith(name + "/"):
            raise ExistsError(
                f"{name} is a file on {branch}, where trainops needs {directory} to be a directory",
                hint="move that file in the GitOps repository, or choose another spec.gitops.path",
            )
        if name.startswith(prefix):
            mode, sha, _stage_number = meta.decode().split(" ")
            existing[name] = (mode, sha)
    removed = sorted(name for name in existing if name not in blobs)
    updates = [f"0 {_ZERO}\t{name}" for name in removed]
    for name, sha in sorted(blobs.items()):
        mode = modes.get(name, _REGULAR)
        if existing.get(name) != (mode, sha):
            updates.append(f"{mode} {sha}\t{name}")
    if not updates:
        return _Staged(tree=None, removed=[])
    data = "".join(f"{line}\0" for line in updates).encode("utf-8", "surrogateescape")
    scratch.run("update-index", "-z", "--index-info", stdin=scratch.write_temp(data), what="stage the files")
    tree = scratch.run("write-tree", what="write the tree").text
    base_tree = scratch.run("rev-parse", f"{base}^{{tree}}", what="read the tip's tree").text if base else None
    if tree == base_tree:
        return _Staged(tree=None, removed=[])
    return _Staged(tree=tree, removed=removed)
