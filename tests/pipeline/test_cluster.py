"""The cluster executor: the training job goes to the GitOps repository (with its stage key),
`trainops run` waits for the checkpoints the job pushes, and a second `trainops run` while
the job is still going waits on it instead of submitting it twice.

The test stands in for the cluster: it reads the run id from the GitOps commit, trains
tiny-llm itself and pushes the checkpoints with the sidecar (`trainops ckpt watch --once`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.pipeline.flow import TRAINOPS, Project, base_manifest, make_project
from trainops_testing.services import require, sigint_default


def _gitops_runs(project: Project) -> list[str]:
    gitops = project.root / ".trainops" / "gitops.git"
    if not gitops.exists():
        return []
    git = require("git", "apt-get install -y git")
    out = subprocess.run(
        [git, "--git-dir", str(gitops), "log", "--format=%(trailers:key=Trainops-Run,valueonly)", "main"],
        capture_output=True,
        text=True,
        env=project.env(),
        check=False,
    )
    return [line for line in out.stdout.split() if line]


def _start(project: Project) -> subprocess.Popen[str]:
    log = (project.root.parent / f"run-{time.monotonic_ns()}.log").open("w")
    return subprocess.Popen(
        [*TRAINOPS, "run", "--to", "train", "--settle", "2", "--timeout", "150", "-o", "json"],
        cwd=project.root,
        preexec_fn=sigint_default,  # Ctrl-C reaches it however the suite was started
        env=project.env(),
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )


def _wait(condition: object, what: str, deadline: float = 90.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if callable(condition) and condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_cluster_run_submits_once_and_waits_for_the_jobs_checkpoints(tmp_path: Path) -> None:
    doc = base_manifest()
    train = doc["spec"].pop("image") and doc["spec"]["train"]
    train.update(scheduler="volcano", image="tiny-llm/image:v1", queue="research")
    project = make_project(tmp_path, doc)
    fake_image = tmp_path / "image"
    fake_image.mkdir()
    (fake_image / "rootfs.txt").write_text("an image stands here\n", encoding="utf-8")
    pushed = project.trainops("push", str(fake_image), "tiny-llm/image:v1")
    assert pushed.returncode == 0, pushed.stderr

    first = _start(project)
    _wait(lambda: _gitops_runs(project), "the job's GitOps commit")
    first.send_signal(signal.SIGINT)  # interrupted while it waits for the job
    first.wait(timeout=30)
    assert first.returncode in (130, -signal.SIGINT)  # interrupted, whichever way Python reports it
    (run_id,) = _gitops_runs(project)

    second = _start(project)
    ckpt = tmp_path / "cluster-ckpt"  # the cluster trains and its sidecar pushes
    trained = subprocess.run(
        [sys.executable, "-m", "tiny_llm.train"],
        cwd=project.root,
        env=project.env(TRAINOPS_CKPT_DIR=str(ckpt), TRAINOPS_MAX_STEPS="200", TRAINOPS_CKPT_EVERY="100"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    sidecar = project.trainops("ckpt", "watch", str(ckpt), "--once", "--run-id", run_id, "--layout", "trainops")
    assert sidecar.returncode == 0, sidecar.stderr
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0
    result = {s["name"]: s for s in json.loads(out)["stages"]}
    assert result["image"]["status"] == "ran" and result["image"]["details"] == {"pinned": "tiny-llm/image:v1"}
    train_result = result["train"]
    assert train_result["status"] == "ran" and train_result["details"]["runId"] == run_id
    assert "waiting for it, not submitting again" in train_result["notes"][0]
    assert train_result["outputs"][0]["ref"].startswith("tiny-llm/checkpoints:step-200@")
    assert _gitops_runs(project) == [run_id]  # submitted once

    again = project.run_json("--to", "train")  # now it is cached, nothing is submitted
    assert {s["name"]: s["status"] for s in again["stages"]}["train"] == "cached"
    assert _gitops_runs(project) == [run_id]
