"""A Hub-compatible server on loopback for the import tests: olah (PyPI), in offline mirror
mode, serving local git repositories through the Hub's own HTTP API (repo info, revision,
tree, resolve). It downloads only: no PyPI package runs a Hub that accepts uploads.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from trainops_testing.services import LOOPBACK, MissingDependency, ServiceError, _ManagedProcess, free_port, wait_for


def git_mirror(root: Path, repo_id: str, files: Path, *, tag: str) -> str:
    """A git repository of `files` at root/models/ORG/NAME (olah's mirror layout), one commit
    on main tagged `tag`; its commit sha."""
    target = root / "models" / repo_id
    shutil.copytree(files, target)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "model"], ["tag", tag]):
        subprocess.run(["git", *args], cwd=target, env={**env, "PATH": "/usr/bin:/bin"}, check=True, timeout=120)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=target, capture_output=True, text=True, check=True)
    return head.stdout.strip()


class OlahHub(_ManagedProcess):
    name = "olah"

    def __init__(self, workdir: Path, mirrors: Path, *, start_timeout: float = 90.0) -> None:
        self.workdir = workdir
        self.mirrors = mirrors
        self.port: int | None = None
        self.start_timeout = start_timeout
        super().__init__(workdir / "olah.log")

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/api/models/none/none", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answered (no such repository): the server is up
        except OSError:
            return False

    def start(self) -> None:
        script = shutil.which("olah-cli", path=str(Path(sys.executable).parent))
        if script is None:
            raise MissingDependency("olah-cli not found: python -m pip install 'olah>=0.5.4' (a dev extra)")
        self.port = free_port()
        config = self.workdir / "olah.toml"
        netloc = f"{LOOPBACK}:{self.port}"
        config.write_text(
            f'[basic]\nhost = "{LOOPBACK}"\nport = {self.port}\nmirror-netloc = "{netloc}"\n'
            f'mirror-lfs-netloc = "{netloc}"\nmirrors-path = ["{self.mirrors}"]\n'
            f'repos-path = "{self.workdir / "repos"}"\n[accessibility]\noffline = true\n'
        )
        command = [script, "-c", str(config), "--log-path", str(self.workdir / "logs")]  # else ./logs
        self._spawn(command, env={"PATH": "/usr/bin:/bin", "HOME": str(self.workdir)})
        try:
            self.startup_seconds = wait_for(
                self._ready, timeout=self.start_timeout, what="olah", proc=self.proc, log_path=self.log_path
            )
        except ServiceError:
            self.stop()
            raise
