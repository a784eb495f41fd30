"""`trainops train cancel RUN` on a Kubernetes target: one commit that removes RUN's job from
the GitOps path (trailer Trainops-Action: cancel), the tenants kept; another run refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.cli.test_train_cli import IMAGE, _git, project  # noqa: F401  (the fixture)
from trainops_testing.cli import run


def _trailers(remote: Path) -> str:
    message = _git(remote, "log", "-1", "--format=%B", "main")
    return subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, check=True
    ).stdout


def test_cancel_commits_the_removal_of_the_run_job_only(project: Path, git_remote: Path) -> None:  # noqa: F811
    assert run("train", "submit", "--image", IMAGE, "--run-id", "r1").code == 0

    out = run("train", "cancel", "r1", "-o", "json")
    assert out.code == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["runId"] == "r1" and data["removed"] == [
        "clusters/dev/train/dashboard.yaml",
        "clusters/dev/train/podmonitor.yaml",
        "clusters/dev/train/volcano-job.yaml",
    ]
    tree = _git(git_remote, "ls-tree", "-r", "--name-only", "main").split()
    # the job goes with the run's monitor and dashboard; the queues and the pipeline's SLO rules stay, and
    # the Application that syncs the path (its prune deletes the job)
    assert tree == [
        "clusters/dev/argocd/application.yaml",
        "clusters/dev/slo/prometheusrule.yaml",
        "clusters/dev/tenants/volcano-queues.yaml",
    ]
    trailers = _trailers(git_remote)
    assert "Trainops-Action: cancel" in trailers and "Trainops-Run: r1" in trailers
    assert _git(git_remote, "rev-list", "--count", "main").strip() == "2"


def test_cancel_of_a_run_the_path_does_not_hold_commits_nothing(project: Path, git_remote: Path) -> None:  # noqa: F811
    assert run("train", "submit", "--image", IMAGE, "--run-id", "r2").code == 0

    out = run("train", "cancel", "r1")
    assert out.code == 4
    assert out.last_error_line.startswith("Error: run r1 is not in main:clusters/dev")
    assert "runs there: r2" in out.last_error_line
    assert _git(git_remote, "rev-list", "--count", "main").strip() == "1"
