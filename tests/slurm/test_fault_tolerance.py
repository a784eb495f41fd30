"""Fault tolerance on the real scheduler: preemption, the time-limit signal, node failure, hangs.

Each test trains examples/tiny-llm (env slurm-local) through the one-node cluster, breaks
the job the way production does, and checks from the outside that it came back: Slurm's
restart count, the checkpoints in the registry, and the lineage's `resumed-from`.

A requeued job waits on its BeginTime before it may start again (Slurm's requeue delay);
the tests move it to a few seconds from now with `scontrol update StartTime=now+3`, as an
operator would (not to now: slurmd refuses a start in the same second as the requeue's kill).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.slurm.test_train_slurm import DONE, overlay, project, steps, submit
from trainops_testing.cli import run
from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]

pytestmark = pytest.mark.slow


def _steps_or_none(root: Path) -> list[int]:
    result = run("ckpt", "ls", "-f", str(root / "trainops.yaml"), "-o", "json")
    return sorted(int(item["step"]) for item in json.loads(result.stdout)) if result.code == 0 else []


def wait_for_checkpoint(root: Path, *, above: int, timeout: float = 120) -> None:
    """Until the registry holds a checkpoint past step `above` (the job is mid-run)."""
    wait_for(
        lambda: any(s > above for s in _steps_or_none(root)), timeout=timeout, what="a pushed checkpoint", interval=0.5
    )


def start_again(slurm: SlurmCluster, job: str, *, restarts: int) -> None:
    """Wait until the job is back in the queue after its restarts-th requeue; let it start now."""
    wait_for(
        lambda: slurm.job(job).get("JobState") == "PENDING" and int(slurm.job(job).get("Restarts", 0)) >= restarts,
        timeout=120,
        what=f"job {job} requeued ({restarts})",
        interval=0.3,
    )
    # not at once: slurmd refuses a start in the same second as the requeue's kill ("Job
    # credential revoked", 1 s resolution), which is what Slurm's own requeue delay avoids
    slurm.wait_node_state(("IDLE",), timeout=60)
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what=f"job {job}'s old steps gone", interval=0.3)
    if slurm.job(job).get("JobState") == "REQUEUE_HOLD":
        slurm.run("scontrol", "release", job, check=True)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now+3", check=True)


def logs(root: Path, run_id: str) -> str:
    return run("train", "logs", run_id, "-f", str(root / "trainops.yaml"), "--env", "slurm-local").stdout


def resumed_from(root: Path, step: int) -> str | None:
    """The `resumed-from` parent of the checkpoint at `step`, as `trainops lineage` walks it."""
    ref = f"tiny-llm/checkpoints:step-{step}"
    result = run("lineage", ref, "-f", str(root / "trainops.yaml"), "--format", "json")
    assert result.code == 0, result.stderr
    graph = json.loads(result.stdout)
    text = json.dumps(graph)
    return "resumed-from" if "resumed-from" in text else None


def test_time_limit_signal_and_preemption_requeue_and_resume(project: Path, slurm: SlurmCluster) -> None:
    overlay(project, "long", {"env": {"TRAINOPS_CKPT_EVERY": "100", "TRAINOPS_MAX_STEPS": "4000"}})
    data = submit(project, "long")
    job, run_id = str(data["jobId"]), str(data["runId"])

    # the time-limit path: sbatch --signal=B:USR1@grace delivers SIGUSR1 to the batch shell
    wait_for_checkpoint(project, above=0)
    slurm.run("scancel", "--signal=USR1", "--batch", job, check=True)
    start_again(slurm, job, restarts=1)
    assert "time limit is near" in slurm.job(job).get("Comment", "") or "time limit" in logs(project, run_id)

    # preemption: the scheduler requeues the running job (SIGTERM to it, then back in the queue)
    slurm.wait_job(job, ("RUNNING",), timeout=120)
    before = max(_steps_or_none(project))
    wait_for_checkpoint(project, above=before)
    slurm.run("scontrol", "requeue", job, check=True)
    start_again(slurm, job, restarts=2)

    info = slurm.wait_job(job, DONE, timeout=300)
    text = logs(project, run_id)
    assert info["JobState"] == "COMPLETED", text[-3000:]
    assert int(info["Restarts"]) == 2
    assert steps(project)[-1] == 4000
    assert text.count("resuming from checkpoint") >= 2, text[-3000:]
    assert resumed_from(project, 4000) == "resumed-from"


def test_node_failure_requeues_and_resumes_from_the_registry(project: Path, slurm: SlurmCluster) -> None:
    overlay(project, "long", {"env": {"TRAINOPS_CKPT_EVERY": "100", "TRAINOPS_MAX_STEPS": "2000"}})
    data = submit(project, "long")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    slurm.run("scontrol", "update", f"NodeName={slurm.host}", "State=DOWN", "Reason=trainops-test", check=True)
    try:
        wait_for(
            lambda: (
                slurm.job(job).get("JobState") in ("PENDING", "REQUEUED", "REQUEUE_HOLD")
                and int(slurm.job(job).get("Restarts", 0)) >= 1
            ),
            timeout=120,
            what=f"job {job} requeued by the node failure",
            interval=0.3,
        )
        # the node comes back with an empty disk: the run directory's checkpoints are gone
        wait_for(lambda: not slurm.job_processes(job), timeout=60, what="the old job's steps gone", interval=0.3)
        shutil.rmtree(project / ".trainops" / "runs" / "tiny-llm" / run_id / "checkpoints")
    finally:  # slurmd answers, so ReturnToService=2 may have returned it already (RESUME is then refused)
        slurm.run("scontrol", "update", f"NodeName={slurm.host}", "State=RESUME")
    slurm.wait_node_state(("IDLE", "MIXED", "ALLOCATED"), timeout=60)
    start_again(slurm, job, restarts=1)
    info = slurm.wait_job(job, DONE, timeout=300)
    text = logs(project, run_id)
    assert info["JobState"] == "COMPLETED", text[-3000:]
    assert steps(project)[-1] == 2000
    assert f"run {run_id}: restored file://" in text, text[-3000:]  # from the registry: the disk was lost
    assert resumed_from(project, 2000) == "resumed-from"


def test_hang_is_killed_restarted_in_place_then_fails_after_max_retry(project: Path, slurm: SlurmCluster) -> None:
    overlay(
        project,
        "hang",
        {
            "command": ["sh", "-c", "echo trainer started; sleep 600"],
            "faultTolerance": {"hangTimeout": "4s", "maxRetry": 1},
            "faults": {"killAfter": "5s"},
            "checkpoint": {"gracePeriod": "5s", "layout": "trainops"},
        },
    )
    data = submit(project, "hang")
    job, run_id = str(data["jobId"]), str(data["runId"])
    started = time.monotonic()
    info = slurm.wait_job(job, DONE, timeout=180)
    assert info["JobState"] == "FAILED"
    assert info["ExitCode"].startswith("9:"), logs(project, run_id)[-3000:]  # CommandFailedError
    assert info["Restarts"] == "0"  # restarted inside the allocation, not through the scheduler
    assert "faultTolerance.maxRetry is 1" in info.get("Comment", "")
    assert time.monotonic() - started < 120
    status = run("train", "status", run_id, "-f", str(project / "trainops.yaml"), "--env", "hang", "-o", "json")
    assert "hang" in json.loads(status.stdout)["comment"]
    text = logs(project, run_id)
    assert text.count("trainer started") == 2, text[-3000:]
    assert "restarting in place" in text, text[-3000:]


def test_a_heartbeat_keeps_a_slow_trainer_alive(project: Path, slurm: SlurmCluster) -> None:
    beat = 'for i in $(seq 8); do touch "$TRAINOPS_HEARTBEAT_FILE"; sleep 1; done; echo heartbeat-done'
    overlay(
        project,
        "beat",
        {"command": ["sh", "-c", beat], "faultTolerance": {"hangTimeout": "4s", "maxRetry": 0}},
    )
    data = submit(project, "beat")
    job, run_id = str(data["jobId"]), str(data["runId"])
    info = slurm.wait_job(job, DONE, timeout=180)
    text = logs(project, run_id)
    assert (info["JobState"], info["Restarts"]) == ("COMPLETED", "0"), text[-3000:]
    assert "heartbeat-done" in text


def test_a_real_time_limit_sends_the_signal_and_the_job_requeues(project: Path, slurm: SlurmCluster) -> None:
    """Slurm itself sends SIGUSR1 checkpoint.gracePeriod before train.slurm.time (no stand-in)."""
    base = yaml.safe_load((project / "trainops.yaml").read_text())["environments"]["slurm-local"]["train"]
    overlay(
        project,
        "limited",
        {
            "env": {"TRAINOPS_CKPT_EVERY": "100", "TRAINOPS_MAX_STEPS": "1000000"},
            "slurm": {**base["slurm"], "time": "00:01:30"},
            "checkpoint": {"gracePeriod": "60s", "layout": "trainops"},
        },
    )
    data = submit(project, "limited")
    job, run_id = str(data["jobId"]), str(data["runId"])
    try:
        start_again(slurm, job, restarts=1)
        assert "the time limit is near (SIGUSR1)" in slurm.job(job).get("Comment", ""), logs(project, run_id)[-3000:]
        assert steps(project), "the last checkpoint was pushed before the requeue"
    finally:
        slurm.run("scancel", job)
