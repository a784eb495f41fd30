"""`trainops train render|submit|run` through the CLI: the rendered tree on disk, in a real
bare git repo (commit, trailers, no-op, replacement), image pinning, and one-line errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops.render import validate_objects
from trainops_testing import planted
from trainops_testing.cli import run
from trainops_testing.services import git_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example.com/llm/tiny-llm/image@{DIGEST}"


def enter_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: dict[str, Any]) -> Path:
    """`doc` as tmp_path/proj/trainops.yaml, the working directory, with a cache and git identity of its own."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.chdir(root)
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in git_env().items():
        if name.startswith("GIT_"):
            monkeypatch.setenv(name, value)
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path) -> Path:
    """tiny-llm's manifest with its GitOps repo pointed at an empty bare repo."""
    doc = yaml.safe_load((EXAMPLE / "trainops.yaml").read_text())
    doc["spec"]["gitops"]["repo"] = f"file://{git_remote}"
    doc["spec"]["registry"] = "oci://registry.example.com/llm"
    return enter_project(tmp_path, monkeypatch, doc)


def _git(remote: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(remote), *args], capture_output=True, text=True, check=True, env=git_env()
    )
    return out.stdout


def test_render_writes_a_tree_that_validates_and_replaces_it_whole(project: Path) -> None:
    out = run("train", "render", "--image", IMAGE, "--run-id", "r1", "--out", "rendered")
    assert out.code == 0, out.stderr
    files = sorted(str(p.relative_to(project / "rendered")) for p in (project / "rendered").rglob("*.yaml"))
    assert files == [
        "argocd/application.yaml",
        "slo/prometheusrule.yaml",
        "tenants/volcano-queues.yaml",
        "train/dashboard.yaml",
        "train/podmonitor.yaml",
        "train/volcano-job.yaml",
    ]
    objects = [doc for path in files for doc in yaml.safe_load_all((project / "rendered" / path).read_text()) if doc]
    assert validate_objects(objects) == []
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["metadata"]["name"] == "tiny-llm-r1"
    assert {c["image"] for t in job["spec"]["tasks"] for c in t["template"]["spec"]["containers"]} == {IMAGE}

    # a second render with another scheduler replaces the tree: the Volcano job is gone
    stale = project / "rendered" / "train" / "volcano-job.yaml"
    out = run("train", "render", "--env", "prod", "--image", IMAGE, "--run-id", "r2", "--out", "rendered")
    assert out.code == 0, out.stderr
    assert stale.is_file()  # prod is volcano too: same file, new content
    assert "tiny-llm-r2" in stale.read_text() and "tiny-llm-r1" not in stale.read_text()


def test_render_refuses_a_directory_it_did_not_render(project: Path) -> None:
    mine = project / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    out = run("train", "render", "--image", IMAGE, "--run-id", "r1", "--out", "mine")
    assert out.code == 5
    assert "was not rendered by trainops" in out.last_error_line
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_render_without_pinned_image_or_for_the_local_scheduler_fails_in_one_line(project: Path) -> None:
    out = run("train", "render", "--env", "dev", "--image", IMAGE, "--run-id", "r1")
    assert out.code == 3 and "nothing to render" in out.last_error_line
    # train.image unset and no built image: the manifest's directory is not a git repo
    out = run("train", "render", "--run-id", "r1")
    assert out.code == 3 and "--image" in out.last_error_line
    assert "Traceback" not in out.stderr
    out = run("train", "render", "--image", IMAGE, "--run-id", "Bad_Run")
    assert out.code == 3 and "DNS label" in out.last_error_line


def test_render_pins_a_tag_through_the_registry(project: Path) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc["spec"]["registry"] = "file://.trainops/registry"
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (project / "img").mkdir()
    (project / "img" / "layer.txt").write_text("not really an image")
    pushed = run("push", "img", "tiny-llm/image:v1")
    assert pushed.code == 0, pushed.stderr
    digest = pushed.stdout.strip()
    out = run("train", "render", "--image", "tiny-llm/image:v1", "--run-id", "r1")
    assert out.code == 0, out.stderr
    assert f"@{digest}" in out.stdout and ":v1" not in out.stdout.split("image:")[1].split("\n")[0]
    missing = run("train", "render", "--image", "tiny-llm/image:nope", "--run-id", "r1")
    assert missing.code == 4 and "push it, or pin it" in missing.last_error_line


def test_render_finds_the_image_built_for_the_commit(project: Path) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc["spec"]["registry"] = "file://.trainops/registry"
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (project / ".gitignore").write_text(".trainops/\nimg/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=project, check=True, env=git_env())
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True)
    (project / "img").mkdir()
    (project / "img" / "x").write_text("x")
    pushed = run("push", "img", f"tiny-llm/image:{sha.stdout.strip()}")
    assert pushed.code == 0, pushed.stderr
    out = run("train", "render", "--run-id", "r1")
    assert out.code == 0, out.stderr
    assert f"@{pushed.stdout.strip()}" in out.stdout


def test_submit_commits_with_trailers_then_is_a_no_op_then_replaces(project: Path, git_remote: Path) -> None:
    out = run("train", "submit", "--image", IMAGE, "--run-id", "r1")
    assert out.code == 0, out.stderr
    assert "committed" in out.stdout
    tree = _git(git_remote, "ls-tree", "-r", "--name-only", "main").split()
    assert tree == [
        "clusters/dev/argocd/application.yaml",
        "clusters/dev/slo/prometheusrule.yaml",
        "clusters/dev/tenants/volcano-queues.yaml",
        "clusters/dev/train/dashboard.yaml",
        "clusters/dev/train/podmonitor.yaml",
        "clusters/dev/train/volcano-job.yaml",
    ]
    message = _git(git_remote, "log", "-1", "--format=%B", "main")
    trailers = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, check=True
    ).stdout
    assert "Trainops-Pipeline: tiny-llm" in trailers
    assert "Trainops-Run: r1" in trailers
    assert f"Trainops-Artifact: {DIGEST}" in trailers
    assert f"Trainops-Image: {IMAGE}" in trailers

    again = run("train", "submit", "--image", IMAGE, "--run-id", "r1")
    assert again.code == 0 and "nothing committed" in again.stdout
    assert _git(git_remote, "rev-list", "--count", "main").strip() == "1"

    nxt = run("train", "submit", "--image", IMAGE, "--run-id", "r2", "-o", "json")
    assert nxt.code == 0, nxt.stderr
    job = yaml.safe_load_all(_git(git_remote, "show", "main:clusters/dev/train/volcano-job.yaml"))
    names = [d["metadata"]["name"] for d in job if d]
    assert names == ["tiny-llm-r2"]
    assert _git(git_remote, "rev-list", "--count", "main").strip() == "2"


def test_submit_to_a_missing_remote_fails_in_one_line(project: Path, git_remote: Path) -> None:
    shutil.rmtree(git_remote)
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    password = planted.secret("gitops-url-password")
    doc["spec"]["gitops"]["repo"] = f"https://user:{password}@git.invalid/repo.git"
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    planted.source(project / "trainops.yaml")
    out = run("train", "submit", "--image", IMAGE, "--run-id", "r1")
    assert out.code != 0
    assert password not in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_run_local_with_a_missing_command_fails_in_one_line(project: Path) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc["environments"]["dev"]["train"]["command"] = ["no-such-trainer-xyz"]
    doc["spec"]["registry"] = "file://.trainops/registry"
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    out = run("train", "run", "--local", "--env", "dev", "--run-id", "r1")
    assert out.code == 3
    assert "'no-such-trainer-xyz' not found" in out.last_error_line
