"""`trainops ckpt` end to end: watch, ls, latest, pull, prune, with defaults from trainops.yaml
and the environment; `watch --until-signal` as a real process that gets SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoint.helpers import hf_ckpt, trainops_ckpt, wait_for
from trainops.checkpoint import list_checkpoints
from trainops.registry.context import Registries
from trainops_testing.cli import REPO, run

MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  registry: file://.trainops/registry
  image: {template: train-pytorch}
  train:
    scheduler: local
    command: [python, -m, tiny_llm.train]
    checkpoint: {layout: trainops, keep: {last: 2, best: 1, metric: val_loss, mode: min}}
"""
DIGEST = "sha256:" + "cd" * 32


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "trainops.yaml").write_text(MANIFEST)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _repo_url(project: Path) -> str:
    return f"file://{project / '.trainops/registry/p/checkpoints'}"


def _tags(url: str) -> list[str]:
    registries = Registries()
    return [i.tag for i in list_checkpoints(registries, repository=registries.ref(url))]


def _losses(project: Path, losses: dict[int, float]) -> None:
    for step, loss in losses.items():
        trainops_ckpt(project / "ckpt", step, metrics={"train_loss": 3.0, "val_loss": loss})


def test_watch_once_ls_latest(project: Path) -> None:
    _losses(project, {10: 2.0, 20: 1.5})
    out = run("ckpt", "watch", "ckpt", "--run-id", "r1", "--once", "--image-digest", DIGEST)
    assert out.code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("pushed step-000010 (step 10) → ")
    assert lines[1].startswith(f"pushed step-000020 (step 20, parent {_repo_url(project)}:step-10) → ")
    ls = run("ckpt", "ls")
    assert ls.code == 0, ls.stderr
    assert "step-20" in ls.stdout and "val_loss=1.5" in ls.stdout
    wide = run("ckpt", "ls", "--wide")
    assert wide.code == 0 and " r1 " in wide.stdout
    listed = json.loads(run("ckpt", "ls", "-o", "json").stdout)
    assert [(c["tag"], c["step"], c["runId"], c["layout"]) for c in listed] == [
        ("step-10", 10, "r1", "trainops"),
        ("step-20", 20, "r1", "trainops"),
    ]
    latest = run("ckpt", "latest")
    assert latest.code == 0
    assert latest.stdout.strip() == f"{_repo_url(project)}:step-20@{listed[1]['digest']}"
    shown = json.loads(run("registry", "show", latest.stdout.strip(), "-o", "json").stdout)
    assert shown["lineage"]["imageDigest"] == DIGEST and shown["lineage"]["pipeline"] == "p"


def test_watch_defaults_from_the_environment(project: Path, tmp_path: Path) -> None:
    _losses(project, {5: 2.0})
    elsewhere = f"file://{tmp_path / 'other-registry'}/x/ckpt"
    env = {"TRAINOPS_CKPT_REPOSITORY": elsewhere, "TRAINOPS_RUN_ID": "from-env", "TRAINOPS_IMAGE_DIGEST": DIGEST}
    out = run("ckpt", "watch", "ckpt", "--once", "-o", "json", env=env)
    assert out.code == 0, out.stderr
    [event] = [json.loads(line) for line in out.stdout.splitlines()]
    assert (event["kind"], event["checkpoint"]["step"], event["checkpoint"]["parent"]) == ("pushed", 5, None)
    assert event["checkpoint"]["ref"].startswith(f"{elsewhere}:step-5@sha256:")
    assert _tags(elsewhere) == ["step-5"]
    assert not (project / ".trainops/registry/p/checkpoints").exists()


def test_watch_applies_the_manifest_retention(project: Path) -> None:
    _losses(project, {1: 1.0, 2: 3.0, 3: 2.0, 4: 2.5})
    out = run("ckpt", "watch", "ckpt", "--run-id", "r", "--once")
    assert out.code == 0, out.stderr
    assert f"removed {_repo_url(project)}:step-2" in out.stdout.splitlines()
    assert _tags(_repo_url(project)) == ["step-1", "step-3", "step-4"]


def test_pull_latest_restores_and_reports(project: Path) -> None:
    empty = run("ckpt", "pull", "--latest", "resume")
    assert empty.code == 0, empty.stderr
    assert empty.stdout.strip() == f"no checkpoint in {_repo_url(project)}"
    _losses(project, {10: 2.0, 20: 1.0})
    assert run("ckpt", "watch", "ckpt", "--run-id", "r", "--once").code == 0
    out = run("ckpt", "pull", "--latest", _repo_url(project), "resume", "-o", "json")
    assert out.code == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["restored"]["step"] == 20 and result["path"] == str(project / "resume" / "step-000020")
    again = run("ckpt", "pull", "--latest", "resume")
    assert again.code == 0 and "nothing pulled" in again.stdout
    one = run("ckpt", "pull", "p/checkpoints:step-10", "older")
    assert one.code == 0, one.stderr
    assert (project / "older" / "step-000010" / "model.safetensors").is_file()


def test_prune(project: Path) -> None:
    _losses(project, {1: 1.0, 2: 3.0, 3: 2.0, 4: 2.5})
    assert run("ckpt", "watch", "ckpt", "--run-id", "r", "--once", "--keep-last", "10").code == 0
    dry = run("ckpt", "prune", "--dry-run")  # the manifest's policy: last 2, best 1 by val_loss
    assert dry.code == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"would remove {_repo_url(project)}:step-2",
        f"would remove 1 checkpoint(s) from {_repo_url(project)}",
    ]
    out = run("ckpt", "prune", "--keep-last", "1", "--protect", "step-2", "-o", "json")
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["removed"] == ["step-1", "step-3"]
    assert _tags(_repo_url(project)) == ["step-2", "step-4"]


def test_one_line_errors(project: Path, tmp_path: Path) -> None:
    bad = run("ckpt", "ls", "oci://registry.example.com/Bad_Repo")
    assert bad.code == 3
    assert bad.stderr.count("\n") == 1
    assert bad.last_error_line.startswith("Error: 'oci://registry.example.com/Bad_Repo' is not a valid reference")
    tagged = run("ckpt", "latest", "p/checkpoints:v1")
    assert tagged.code == 3 and "names a tag or digest" in tagged.last_error_line
    none = run("ckpt", "latest")
    assert none.code == 4 and none.last_error_line.startswith("Error: no checkpoint in ")
    no_run = run("ckpt", "watch", "ckpt", "--once")
    assert no_run.code == 2 and "no run id" in no_run.last_error_line
    assert run("ckpt", "prune").code == 0  # the manifest's policy, on an empty repository
    flags = run("ckpt", "prune", "--keep-best", "1")  # flags replace the manifest's policy whole
    assert flags.code == 2 and "needs a metric" in flags.last_error_line
    outside = tmp_path / "outside"
    outside.mkdir()
    os.chdir(outside)
    alone = {"TRAINOPS_CEILING_DIRECTORIES": str(tmp_path)}  # the project's trainops.yaml is above: not searched
    nowhere = run("ckpt", "ls", env=alone)
    assert nowhere.code == 4 and "no checkpoint repository given" in nowhere.last_error_line
    found = run("ckpt", "ls")  # found upward, as git finds .git: the project's repository (empty)
    assert found.code == 4 and f"no repository {_repo_url(project)}" in found.last_error_line
    nopolicy = run("ckpt", "prune", f"file://{outside}/r", env=alone)
    assert nopolicy.code == 2 and "no retention policy" in nopolicy.last_error_line
    usage = run("ckpt", "pull", "only-one")
    assert usage.code == 2
    digest = run("ckpt", "watch", str(outside), "--repository", f"file://{outside}/r", "--run-id", "r", "--once",
                 "--image-digest", "sha256:nope")  # fmt: skip
    assert digest.code == 2 and "imageDigest" in digest.last_error_line
    mixed = tmp_path / "mixed"
    trainops_ckpt(mixed, 1)
    hf_ckpt(mixed, 2)
    amb = run("ckpt", "watch", str(mixed), "--repository", f"file://{outside}/r", "--run-id", "r", "--once", env=alone)
    assert amb.code == 3 and "pass --layout" in amb.last_error_line
    gone = run(
        "ckpt", "watch", str(tmp_path / "gone"), "--repository", f"file://{outside}/r", "--run-id", "r", "--once"
    )
    assert gone.code == 4 and "is not a directory" in gone.last_error_line


def test_leader_only_pushes_nothing_on_other_ranks(project: Path) -> None:
    _losses(project, {1: 1.0})
    out = run("ckpt", "watch", "ckpt", "--run-id", "r", "--once", "--leader-only", env={"TRAINOPS_NODE_RANK": "3"})
    assert out.code == 0 and "node rank 3 is not the leader" in out.stderr
    assert not (project / ".trainops/registry").exists()
    out = run("ckpt", "watch", "ckpt", "--run-id", "r", "--once", "--leader-only", env={"TRAINOPS_NODE_RANK": "0"})
    assert out.code == 0 and _tags(_repo_url(project)) == ["step-1"]


def _spawn(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_") or k == "TRAINOPS_CACHE_DIR"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "trainops.cli.main", "ckpt", "watch", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_until_signal_does_a_final_scan_on_sigterm(project: Path) -> None:
    _losses(project, {1: 1.0})
    # A long interval: after start-up, only the final scan can push what comes next.
    proc = _spawn(["ckpt", "--run-id", "r", "--interval", "1h", "--until-signal", "--keep-last", "5"], project)
    try:
        wait_for(lambda: _tags(_repo_url(project)) == ["step-1"] or proc.poll() is not None, what="the first push")
        assert proc.poll() is None, proc.communicate()
        _losses(project, {2: 0.5})
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert _tags(_repo_url(project)) == ["step-1", "step-2"]
    assert [line.split()[1] for line in out.splitlines()] == ["step-000001", "step-000002"]


def test_until_pid_stops_when_the_trainer_exits(project: Path) -> None:
    trainer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    proc = _spawn(["ckpt", "--run-id", "r", "--interval", "1h", "--until-pid", str(trainer.pid)], project)
    try:
        _losses(project, {7: 1.0})
        assert trainer.stdin is not None
        trainer.stdin.close()  # the trainer finishes (and is reaped below)
        trainer.wait(30)
        _, err = proc.communicate(timeout=60)
    finally:
        trainer.kill()
        proc.kill()
    assert proc.returncode == 0, err
    assert _tags(_repo_url(project)) == ["step-7"]
