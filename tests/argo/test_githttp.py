"""The GitOps repo's transport for Argo CD: git's smart HTTP (`git http-backend`) on loopback.

trainops pushes a rollout commit to the http:// URL and git clones it back from there, the
way Argo CD's repo-server reads it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops_testing.argo_cluster import HERE, _Proc
from trainops_testing.argo_live import start_args
from trainops_testing.cli import run
from trainops_testing.projects import make_project
from trainops_testing.services import free_port, git_env


@pytest.fixture
def git_http(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    root, port = tmp_path / "git", free_port()
    root.mkdir()
    proc = _Proc("githttp", tmp_path / "githttp.log")
    proc.run([sys.executable, str(HERE / "githttp.py"), "--root", str(root), "--port", str(port)],
             env=git_env(), ready=port, timeout=30)  # fmt: skip
    yield root, port
    proc.stop()


def test_trainops_pushes_and_git_clones_over_http(git_http: tuple[Path, int], tmp_path: Path) -> None:
    from trainops_testing.githttp import bare_repo

    root, port = git_http
    bare_repo(root, "gitops.git")
    url = f"http://127.0.0.1:{port}/gitops.git"
    project = make_project(
        tmp_path / "project", {"spec": {"gitops": {"repo": url, "branch": "main", "path": "clusters/dev"}}}
    )
    outcome = run(*project.cli(*start_args("v1")))
    assert outcome.code == 0, outcome.stderr
    served = bare_repo(root, "gitops.git")
    pushed = subprocess.run(["git", "-C", str(served), "rev-parse", "main"], capture_output=True, text=True, check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", url, str(clone)], check=True, env=git_env())
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout == pushed.stdout
    assert (clone / "clusters/dev-serve/rollout.yaml").is_file()
    assert (
        "Trainops-Action: start"
        in subprocess.run(
            ["git", "-C", str(clone), "log", "-1", "--format=%B"], capture_output=True, text=True, check=True
        ).stdout
    )


def test_an_unknown_repository_is_a_404(git_http: tuple[Path, int], tmp_path: Path) -> None:
    _, port = git_http
    done = subprocess.run(["git", "ls-remote", f"http://127.0.0.1:{port}/nothing.git"], capture_output=True,
                          text=True, env=git_env(), check=False)  # fmt: skip
    assert done.returncode != 0
    assert "not found" in done.stderr.lower() or "404" in done.stderr
