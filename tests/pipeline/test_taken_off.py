"""A rollback (or an abort) is a decision the flow respects.

After `rollout rollback` took v2 off (v1 stable again), `trainops run` does not start a
canary of v2 again: the rollout stage is skipped, saying which commit took it off and how
to roll it out anyway (`--force --reason`, recorded in the commit). Likewise after an abort,
and `trainops ci` on a push that changes the rollout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.registry.conftest import make_tree
from trainops.registry import media
from trainops_testing.cli import run
from trainops_testing.services import git_env

PLACEHOLDER = "registry.example.com/serve-vllm@sha256:" + "0" * 64


def _project(tmp_path: Path) -> Path:
    """A project that serves proj/model:v2 (rollout.model, no release stage), in a git repository."""
    root = tmp_path / "proj"
    root.mkdir()
    doc: dict[str, Any] = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "proj"},
        "spec": {
            "registry": "file://.trainops/registry",
            "gitops": {"repo": "file://.trainops/gitops.git", "branch": "main", "path": "clusters/dev"},
            "rollout": {
                "engine": "vllm",
                "model": "proj/model:v2",
                "pinnedImage": PLACEHOLDER,
                "canary": {"steps": [{"weight": 10}, {"weight": 100}]},
            },
        },
    }
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    (root / ".gitignore").write_text(".trainops/\n", encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "proj"]):
        subprocess.run(["git", *args], cwd=root, env=git_env(), check=True, capture_output=True)
    for version in ("v1", "v2"):
        src = make_tree(tmp_path / version, {"weights.bin": version.encode() * 100})
        notes = f"{media.A_RELEASE_CHECKPOINT}=proj/checkpoints:step-1@sha256:" + "1" * 64
        pushed = run("push", str(src), f"proj/model:{version}", "--kind", "model", "--annotation", notes, *_f(root))
        assert pushed.code == 0, pushed.stderr
    return root


def _f(root: Path) -> tuple[str, str]:
    return ("-f", str(root / "trainops.yaml"))


def _gitops_log(root: Path) -> list[str]:
    git_dir = root / ".trainops" / "gitops.git"
    done = subprocess.run(["git", "--git-dir", str(git_dir), "log", "--format=%H%n%B", "main"], capture_output=True)
    return done.stdout.decode().splitlines()


def _rollout(root: Path, *args: str) -> None:
    done = run("rollout", *args, *_f(root))
    assert done.code == 0, done.stderr


def _stages(done: Any) -> dict[str, dict[str, Any]]:
    assert done.code == 0, done.stderr
    return {stage["name"]: stage for stage in json.loads(done.stdout)["stages"]}


def test_run_does_not_roll_out_again_what_was_rolled_back_or_aborted(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _rollout(root, "start", "proj/model:v1")  # the first release: stable at once
    _rollout(root, "start", "proj/model:v2")
    _rollout(root, "promote", "--full")
    _rollout(root, "rollback")  # v1 stable again, v2 taken off
    taken_off = json.loads(run("rollout", "status", *_f(root), "-o", "json").stdout)["commit"]
    before = _gitops_log(root)

    planned = _stages(run("run", *_f(root), "--dry-run", "-o", "json"))["rollout"]
    assert planned["status"] == "skipped" and planned["why"].startswith("v2 was rolled back at GitOps commit")
    done = run("run", *_f(root), "-o", "json")
    rollout = _stages(done)["rollout"]
    assert rollout["status"] == "skipped"
    assert rollout["why"].startswith(f"v2 was rolled back at GitOps commit {taken_off[:12]} (")
    assert rollout["why"].endswith("not rolled out again; pass --force --reason TEXT to roll it out anyway")
    assert _gitops_log(root) == before  # nothing committed
    status = json.loads(run("rollout", "status", *_f(root), "-o", "json").stdout)
    assert status["stable"]["version"] == "v1" and status["canary"] is None

    refused = run("run", *_f(root), "--force")
    assert refused.code == 2 and refused.stderr.splitlines() == [
        "Error: --force needs --reason TEXT: say why the release is rolled out again"
    ]
    assert _gitops_log(root) == before

    forced = _stages(run("run", *_f(root), "--force", "--reason", "the tokenizer is fixed", "-o", "json"))
    assert forced["rollout"]["status"] == "ran"
    status = json.loads(run("rollout", "status", *_f(root), "-o", "json").stdout)
    assert status["canary"]["version"] == "v2"
    assert f"Rolls out again v2, taken off by rollback at {taken_off}: the tokenizer is fixed" in _gitops_log(root)

    # An abort takes the canary off too; a changed rollout (its stage runs again) respects it.
    _rollout(root, "abort")
    aborted = json.loads(run("rollout", "status", *_f(root), "-o", "json").stdout)["commit"]
    manifest = root / "trainops.yaml"
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    doc["spec"]["rollout"]["replicas"] = 3
    manifest.write_text(yaml.safe_dump(doc), encoding="utf-8")
    for args in (["add", "-A"], ["commit", "-q", "-m", "two more replicas"]):
        subprocess.run(["git", *args], cwd=root, env=git_env(), check=True, capture_output=True)
    ci = run("ci", *_f(root), "--since", "HEAD~1", "-o", "json")  # what CI runs on that push
    assert ci.code == 0, ci.stderr
    again = {stage["name"]: stage for stage in json.loads(ci.stdout)["run"]["stages"]}["rollout"]
    assert again["status"] == "skipped" and again["why"].startswith(f"v2 was aborted at GitOps commit {aborted[:12]}")
