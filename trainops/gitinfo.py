"""What git says about a working tree: the commit (with -dirty) and its time, for lineage;
and the one way trainops runs the git CLI: `git` (status, bytes and stderr, for the GitOps
scratch repositories of trainops.gitops) and `run_git` (its stdout, or None, for a working
tree).

This runs the git CLI directly rather than importing GitPython: it is on the path of every
`trainops push`, whose start-up time matters.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import NotFoundError

# Variables that tell git which repository to use. A git hook (post-receive in a bare
# repository sets GIT_DIR=.) passes them to what it runs; `git -C PATH` must find the
# repository holding PATH, so they are dropped.
_LOCATING = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_QUARANTINE_PATH",
        "GIT_PREFIX",
    }
)
GIT_TIMEOUT = 30.0
_C_LOCALE = {"LC_ALL": "C", "LANGUAGE": "C"}  # git's messages in English, as its callers parse them


@dataclass(frozen=True)
class GitOutput:
    status: int  # git's exit status; -1 when it timed out (stderr then starts "Timeout:")
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class GitState:
    commit: str  # 40 hex, with "-dirty" when the tree has uncommitted changes
    commit_time: int  # seconds since the epoch
    remote: str | None


def git(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: Path | None = None,
    timeout: float | None = GIT_TIMEOUT,
) -> GitOutput:
    """`git -C cwd ARGS` in the C locale, without the caller's repository-locating variables
    (`env` adds variables, those included), reading `stdin` if given; `timeout` None waits.

    Raises NotFoundError when git is not installed; a timeout kills git and is status -1.
    """
    environ = {k: v for k, v in os.environ.items() if k not in _LOCATING}
    environ.update(_C_LOCALE)
    environ.update(env or {})
    try:
        with stdin.open("rb") if stdin is not None else open(os.devnull, "rb") as stream:
            out = subprocess.run(
                ["git", "-C", str(cwd), *args], stdin=stream, capture_output=True, timeout=timeout, env=environ
            )
    except FileNotFoundError:
        raise NotFoundError("git is not installed", hint="install git (apt-get install -y git)") from None
    except subprocess.TimeoutExpired as exc:
        return GitOutput(-1, b"", f"Timeout: git {args[0] if args else ''} did not complete in {exc.timeout:.0f}s")
    return GitOutput(out.returncode, out.stdout, out.stderr.decode("utf-8", "replace"))


def run_git(path: Path, *args: str, env: Mapping[str, str] | None = None) -> str | None:
    """git's stdout for `git -C path ARGS`, or None when it fails, times out or is missing.
    `env` adds variables (an author, say) to the environment, less the repository-locating ones."""
    try:
        out = git(*args, cwd=path, env=env)
    except (NotFoundError, OSError):
        return None
    return out.stdout.decode("utf-8", "replace") if out.status == 0 else None


def git_available() -> bool:
    """Whether the git CLI runs here."""
    return run_git(Path.cwd(), "--version") is not None


def _git(path: Path, *args: str) -> str | None:
    out = run_git(path, *args)
    return out.strip() if out is not None else None


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
