"""A throw-away bare repository that talks to the GitOps remote.

Every write and every history read happens in a fresh temporary directory (prefix
``trainops-gitops-`` under ``tempfile.gettempdir()``), removed on the way out whatever
happens. It holds a bare repository with one remote, ``origin``, whose URL is written into
its config file directly, so credentials in a URL never reach a process's command line.
There is no working tree: trees are built in a private index with git plumbing, so the
size of the rest of the GitOps repository does not matter and nothing is ever checked out.

git runs through the one git runner, `trainops.gitinfo.git`, in the C locale (stable messages to parse),
an explicit ``GIT_DIR`` and ``GIT_INDEX_FILE`` (so trainops run from inside a git hook,
where git exports those, cannot touch the caller's repository), literal pathspecs and,
unless the caller set it, ``GIT_TERMINAL_PROMPT=0``: a missing credential fails with a
message instead of waiting for a password nobody will type.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from trainops.errors import InputError, NotFoundError, RemoteError, TrainopsError
from trainops.gitinfo import GitOutput, git
from trainops.gitops.remote import Remote

TEMP_PREFIX = "trainops-gitops-"
NETWORK_TIMEOUT = 600.0  # seconds for one fetch, push or ls-remote
_MAX_REASON = 400

# Variables git exports to hooks and aliases; inherited, they would point our commands at
# someone else's repository. Each is replaced by its value for the scratch repository.
_INHERITED = ("GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")
_NOT_FOUND = re.compile(
    r"repository '.*' not found|repository not found|does not appear to be a git repository|could not be found"
    r"|no such repository|not a git repository",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"authentication failed|could not read (username|password)|terminal prompts disabled|permission denied"
    r"|access denied|\b40[13]\b",
    re.IGNORECASE,
)
_GENERIC = {"Could not read from remote repository.", "the remote end hung up unexpectedly"}
_REASON_LINE = re.compile(r"^(fatal|error|ERROR): *(.*)$")
_MOVED = {"non-fast-forward", "fetch first"}
_LOCKED = ("failed to update ref", "failed to lock", "cannot lock ref", "incorrect old value")


def config_value(text: str) -> str:
    """`text` as a git config value: quoted, so '#' and ';' do not start a comment, with
    backslash, quote, newline and tab escaped (git reads it back unchanged)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def one_line(text: str, limit: int = _MAX_REASON) -> str:
    """Whitespace runs (newlines included) collapsed to one space, cut at ``limit``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def reason(stderr: str) -> str:
    """git's own one-line explanation: the first fatal/error line, else the last line.

    When that line is only git's generic "Could not read from remote repository." (or "the
    remote end hung up"), the transport's own line before it says more (``ssh: connect to
    host … refused``, ``ERROR: Repository not found.``) and is taken instead.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    before: list[str] = []
    for line in lines:
        match = _REASON_LINE.match(line)
        if match and match.group(2):
            text = match.group(2)
            if text not in _GENERIC:
                return text
            useful = [b for b in before if not b.startswith(("hint:", "warning:"))]
            return useful[-1] if useful else text
        before.append(line)
    return lines[-1] if lines else "git gave no reason"


class Scratch:
    """Context manager: a temporary bare repository with ``origin`` set to the remote."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.root = Path()
        self.git_dir = Path()
        self._env: dict[str, str] | None = None
        self._counter = 0

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Scratch:
        self.root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        try:
            self.git_dir = self.root / "repo.git"
            self._env = self.environment_for(self.git_dir)
            self.init_bare(self.git_dir, what="prepare a scratch repository")
            self._set_origin()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def environment_for(self, git_dir: Path) -> dict[str, str]:
        """The variables that aim git at ``git_dir`` and nothing else."""
        env = {
            "GIT_DIR": str(git_dir),
            "GIT_INDEX_FILE": str(self.root / "index"),
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_TERMINAL_PROMPT": os.environ.get("GIT_TERMINAL_PROMPT", "0"),
        }
        replacements = {
            "GIT_WORK_TREE": str(self.root / "work"),
            "GIT_COMMON_DIR": str(git_dir),
            "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
        }
        for name in _INHERITED:
            if name in os.environ:
                env[name] = replacements[name]
        if "GIT_WORK_TREE" in env:
            (self.root / "work").mkdir(exist_ok=True)
        if "GIT_NAMESPACE" in os.environ:
            env["GIT_NAMESPACE"] = ""
        return env

    def init_bare(self, directory: Path, *, what: str) -> None:
        """``git init --bare directory``, even under an inherited ``GIT_WORK_TREE``."""
        env = self.environment_for(directory)
        if "GIT_WORK_TREE" not in env:
            self.run("init", "--bare", "--quiet", str(directory), env=env, what=what)
            return
        # git refuses --bare while GIT_WORK_TREE is set (as in some hooks): init, then make it bare
        self.run("init", "--quiet", str(directory), env=env, what=what)
        config = str(directory / "config")
        self.run("config", "--file", config, "core.bare", "true", env=env, what=what)
        for option in ("core.worktree", "core.logallrefupdates"):  # status 5: it was not set
            self.run("config", "--file", config, "--unset-all", option, env=env, what=what, check=False)

    def _set_origin(self) -> None:
        # written into the file, not passed to `git config`: credentials in the URL stay off
        # every command line
        with (self.git_dir / "config").open("a", encoding="utf-8") as config:
            config.write(f'[remote "origin"]\n\turl = {config_value(self.remote.url)}\n')
        # git must read back exactly that URL (quoting of '#', ';', '"' and '\' in a config value)
        stored = self.run("config", "--get", "remote.origin.url", what="read the remote URL back", check=False)
        if stored.stdout.rstrip(b"\n").decode("utf-8", "surrogateescape") != self.remote.url:
            raise InputError(
                f"git cannot store the URL {self.remote.display} in a config file unchanged",
                hint="percent-encode unusual characters in the URL",
            )

    # ------------------------------------------------------------------ running git

    def run(
        self,
        *args: str,
        what: str,
        stdin: Path | None = None,
        env: Mapping[str, str] | None = None,
        network: bool = False,
        check: bool = True,
    ) -> GitOutput:
        """Run ``git args``; with ``check`` a failure raises a TrainopsError naming ``what``."""
        assert self._env is not None, "Scratch used outside its with-block"
        result = git(
            *args,
            cwd=self.root,
            env={**self._env, **(env or {})},
            stdin=stdin,
            timeout=NETWORK_TIMEOUT if network else None,
        )
        out = GitOutput(result.status, result.stdout, self.remote.scrub(result.stderr))
        if check and out.status != 0:
            if network:
                raise self.remote_error(out.stderr, what=what)
            raise TrainopsError(
                f"git could not {what}: {one_line(reason(out.stderr))}",
                hint="check the git installation and your git configuration, then retry",
            )
        return out

    def remote_error(self, stderr: str, *, what: str, otherwise: TrainopsError | None = None) -> TrainopsError:
        """The error for a failed fetch, ls-remote or push: timeout, not found, authentication, other."""
        shown = self.remote.display
        why = one_line(reason(stderr))
        if stderr.startswith("Timeout:"):
            return RemoteError(
                f"git timed out trying to {what} {shown} after {NETWORK_TIMEOUT:.0f}s",
                hint="check the network path to the remote and retry",
            )
        if _NOT_FOUND.search(stderr):
            return NotFoundError(
                f"GitOps repository {shown} was not found: {why}",
                hint="check spec.gitops.repo, and that your git credentials can see it (`git ls-remote URL`)",
            )
        if self.remote.local is None and _AUTH.search(stderr):
            return RemoteError(
                f"git could not authenticate to {shown}: {why}",
                hint="set up a credential helper, token or SSH agent for this host; `git ls-remote URL` shows the same",
            )
        if otherwise is not None:
            return otherwise
        return RemoteError(f"git could not {what} {shown}: {why}", hint="check the URL and the network, then retry")

    def write_temp(self, data: bytes) -> Path:
        """A new file in the scratch directory holding ``data``."""
        self._counter += 1
        path = self.root / f"input-{self._counter}"
        path.write_bytes(data)
        return path

    # ------------------------------------------------------------------ remote refs

    def check_branch(self, branch: str) -> None:
        if not isinstance(branch, str) or not branch or branch.startswith("-"):
            raise InputError(f"{branch!r} is not a valid branch name", hint="use a name such as main or envs/prod")
        out = self.run("check-ref-format", f"refs/heads/{branch}", what="check the branch name", check=False)
        if out.status != 0:
            raise InputError(
                f"{branch!r} is not a valid branch name",
                hint="use a name `git check-ref-format --branch` accepts, such as main or envs/prod",
            )

    def fetch_tip(self, branch: str, *, depth: int | None = 1, trees_only: bool = False) -> str | None:
        """Fetch ``branch`` into the scratch repository; its commit, or None if it has none yet."""
        local = "refs/trainops/base"
        args = ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules"]
        if depth is not None:
            args.append(f"--depth={depth}")
        if trees_only:
            args.append("--filter=blob:none")
        args += ["origin", f"+refs/heads/{branch}:{local}"]
        for _ in range(3):
            out = self.run(*args, what="fetch from", network=True, check=False)
            if out.status == 0:
                return self.run("rev-parse", "--verify", f"{local}^{{commit}}", what="read the fetched commit").text
            # Failed: an empty repository or a missing branch, or a real problem. ls-remote tells;
            # a branch that exists now was created by another writer since: fetch it again.
            if self.remote_tip(branch) is None:
                return None
        raise self.remote_error(out.stderr, what=f"fetch {branch} from")

    def remote_tip(self, branch: str) -> str | None:
        """The commit ``branch`` points at on the remote, or None; raises if unreachable."""
        ref = f"refs/heads/{branch}"
        out = self.run("ls-remote", "origin", ref, what="reach", network=True)
        for line in out.text.splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def push(self, commit: str, branch: str, base: str | None) -> bool:
        """Push ``commit`` to ``branch``: True if it landed, False if the branch moved first.

        Any other refusal raises ``RemoteError`` with git's reason and the remote's own
        messages (a hook's output, a protection rule) on one line.
        """
        if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):  # never an empty source: that deletes
            raise TrainopsError(f"internal error: refusing to push {commit!r}")
        ref = f"refs/heads/{branch}"
        out = self.run("push", "--porcelain", "origin", f"{commit}:{ref}", what="push to", network=True, check=False)
        line = next((entry for entry in out.text.splitlines() if entry.split("\t")[1:2] == [f"{commit}:{ref}"]), None)
        if line is None:  # no status line: the push failed before or while the remote updated refs
            if out.status == 0:
                raise RemoteError(f"push to {self.remote.display} reported nothing for {branch}")
            failed = RemoteError(
                f"push to {self.remote.display} ({branch}) failed: {one_line(_details(out.stderr))}",
                hint=f"git reported no result for the branch: check it with `git ls-remote URL {branch}`, then retry",
            )
            raise self.remote_error(out.stderr, what="push to", otherwise=failed)
        flag, _, summary = line.split("\t", 2)
        if flag in (" ", "*", "+", "="):
            return True
        match = re.match(r"^\[([^\]]*)\](?: \((.*)\))?", summary)
        kind, why = (match.group(1), match.group(2) or "") if match else (summary, "")
        if kind == "rejected" and why in _MOVED:
            return False
        if kind == "remote rejected" and any(word in why for word in _LOCKED) and self.remote_tip(branch) != base:
            return False  # another push won the race for the ref lock
        messages = _details(out.stderr, remote_only=True)
        detail = f"{kind} ({why})" if why else kind
        text = f"{detail}: {messages}" if messages else detail
        raise RemoteError(
            f"push to {self.remote.display} ({branch}) was refused: {one_line(text)}",
            hint="the remote was not changed; fix what it reports (hook, permissions, branch protection) and retry",
        )


def _details(stderr: str, *, remote_only: bool = False) -> str:
    """What git and the server said, joined with " / ": the reason first, advice left out.

    ``remote_only`` keeps just the server's own lines (``remote: …``, a hook's output).
    """
    first = reason(stderr)
    lines = [] if remote_only else [first]
    for raw in stderr.splitlines():
        line = raw.strip()
        if line.startswith("remote:"):
            line = line[len("remote:") :].strip()
        elif remote_only or line.startswith(("hint:", "To ")) or "failed to push some refs" in line:
            continue
        line = _REASON_LINE.sub(r"\2", line)
        if line and line not in lines:
            lines.append(line)
    return " / ".join(lines)
