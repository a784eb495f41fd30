"""Faults injected into real runs on the three-node Slurm cluster (`trainops drill`), and what
the supervisor does: detect within seconds, act as the table says, record the incident,
resume from the newest complete checkpoint or stop with the diagnosis in one line.

Each test trains examples/tiny-llm (env slurm-local with train.faults set) and checks from
the outside: Slurm's view of the job and nodes, the registry's incidents (`trainops
incidents`), the checkpoints and the job's output.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.slurm.test_fault_tolerance import logs, wait_for_checkpoint
from tests.slurm.test_train_slurm import DONE, overlay, project, steps, submit
from trainops_testing.cli import run
from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]

pytestmark = pytest.mark.slow


def _incidents(root: Path, run_id: str) -> list[dict[str, object]]:
    result = run("incidents", "ls", run_id, "-f", str(root / "trainops.yaml"), "-o", "json")
    assert result.code == 0, result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout)["incidents"]
    return found


def _wait_incident(root: Path, run_id: str, count: int = 1, timeout: float = 60) -> list[dict[str, object]]:
    wait_for(lambda: len(_incidents(root, run_id)) >= count, timeout=timeout, what="an incident", interval=0.3)
    return _incidents(root, run_id)


def _drill(root: Path, fault: str, run_id: str, *args: str) -> float:
    """Inject once the trainer runs; the moment the evidence appeared (epoch seconds)."""
    result = None

    def injected() -> bool:
        nonlocal result
        result = run("drill", fault, run_id, "-f", str(root / "trainops.yaml"), "--env", "faults", "-o", "json", *args)
        return result.code == 0

    wait_for(injected, timeout=60, what=f"the {fault} drill", interval=0.3)
    assert result is not None
    return _epoch(json.loads(result.stdout)["injected"])


def _epoch(text: object) -> float:
    from trainops import clock

    return clock.parse(str(text)).timestamp()


def _start_again(slurm: SlurmCluster, job: str) -> None:
    """The requeued job back in the queue, its old steps gone: let it start now (Slurm's
    requeue delay would hold it two minutes), as tests/slurm/test_fault_tolerance.py does."""
    wait_for(
        lambda: slurm.job(job).get("JobState") == "PENDING" and int(slurm.job(job).get("Restarts", 0)) >= 1,
        timeout=120,
        what=f"job {job} requeued",
        interval=0.3,
    )
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what=f"job {job}'s old steps gone", interval=0.3)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now+3", check=True)


def _faults_env(root: Path, name: str, slurm: SlurmCluster, **extra: object) -> None:
    faults = {"nodeHealth": [{"file": str(root / "kern-{node}.log")}], "killAfter": "5s", **extra}
    overlay(
        root,
        name,
        {
            "env": {"TRAINOPS_CKPT_EVERY": "50", "TRAINOPS_MAX_STEPS": "1500"},
            "faultTolerance": {"hangTimeout": "6s", "maxRetry": 3},
            "faults": faults,
        },
    )
    for node in slurm.nodes:
        (root / f"kern-{node}.log").write_text("")


def test_nccl_timeout_restarts_in_place_and_resumes(project: Path, slurm_nodes: SlurmCluster) -> None:
    _faults_env(project, "faults", slurm_nodes)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    evidence = _drill(project, "nccl-timeout", run_id)
    incident = _wait_incident(project, run_id)[0]
    assert (incident["fault"], incident["action"]) == ("nccl-timeout", "restart"), logs(project, run_id)[-3000:]
    assert _epoch(incident["evidenceAt"]) - evidence < 5, incident
    assert _epoch(incident["detected"]) - evidence < 5, incident
    assert any("Watchdog caught collective operation timeout" in str(line) for line in incident["evidence"])  # type: ignore[union-attr]
    info = slurm_nodes.wait_job(job, DONE, timeout=300)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "0", info  # in place: no requeue
    assert steps(project)[-1] == 1500
    recovered = _incidents(project, run_id)[0]
    assert recovered["recovered"] is not None and recovered["resumedStep"] is not None, recovered
    assert recovered["stepsLost"] == int(recovered["lastStep"]) - int(recovered["resumedStep"])  # type: ignore[call-overload]
    status = json.loads(
        run("train", "status", run_id, "-f", str(project / "trainops.yaml"), "--env", "faults", "-o", "json").stdout
    )
    assert status["ettr"]["starts"] == 2 and 0 < status["ettr"]["ettr"] <= 1, status
    text = run("train", "status", run_id, "-f", str(project / "trainops.yaml"), "--env", "faults").stdout
    assert f"  ettr    {status['ettr']['ettr']:.3f}" in text and "  mttr    " in text and "  advice  " in text, text


def test_cuda_oom_stops_with_the_diagnosis(project: Path, slurm_nodes: SlurmCluster) -> None:
    _faults_env(project, "faults", slurm_nodes)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    evidence = _drill(project, "cuda-oom", run_id)
    info = slurm_nodes.wait_job(job, DONE, timeout=120)
    assert info["JobState"] == "FAILED", info
    incident = _incidents(project, run_id)[0]
    assert (incident["fault"], incident["action"]) == ("cuda-oom", "stop")
    assert _epoch(incident["detected"]) - evidence < 5, incident
    assert "cuda-oom" in info.get("Comment", "") and "→ stop" in info.get("Comment", ""), info


def test_xid_79_drains_the_node_and_requeues_without_it(project: Path, slurm_nodes: SlurmCluster) -> None:
    _faults_env(project, "faults", slurm_nodes)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    node = slurm_nodes.job(job)["NodeList"]
    evidence = _drill(project, "xid", run_id, "--node", node, "--xid", "79")
    incident = _wait_incident(project, run_id)[0]
    assert (incident["fault"], incident["action"], incident["node"]) == ("fell-off-bus", "drain", node)
    assert _epoch(incident["detected"]) - evidence < 5, incident
    wait_for(lambda: slurm_nodes.node_state(node).startswith("DRAIN"), timeout=30, what=f"{node} drained", interval=0.3)
    assert "fell-off-bus" in slurm_nodes.node_reason(node)
    _start_again(slurm_nodes, job)
    assert node in slurm_nodes.job(job).get("ExcNodeList", ""), slurm_nodes.job(job)
    info = slurm_nodes.wait_job(job, DONE, timeout=300)
    assert info["JobState"] == "COMPLETED" and info["NodeList"] != node, info
    assert steps(project)[-1] == 1500
    recovered = _incidents(project, run_id)[0]
    assert recovered["recovered"] is not None
    # MTTR in phases: each instant recorded, in order; the wait for the requeued job to start
    # (held here to StartTime=now+3 after the requeue) is in reschedule
    status = run("train", "status", run_id, "-f", str(project / "trainops.yaml"), "--env", "faults", "-o", "json")
    [row] = json.loads(status.stdout)["ettr"]["incidents"]
    phases = row["phases"]
    assert all(v is not None and v >= 0 for v in phases.values()), phases
    assert abs(sum(phases.values()) - row["mttrSeconds"]) < 0.01, (phases, row)
    assert phases["rescheduleSeconds"] >= 2, phases


def test_hang_is_detected_after_hang_timeout_and_restarted(project: Path, slurm_nodes: SlurmCluster) -> None:
    _faults_env(project, "faults", slurm_nodes)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    stopped = _drill(project, "hang", run_id)
    incident = _wait_incident(project, run_id)[0]
    assert (incident["fault"], incident["action"]) == ("hang", "restart")
    assert _epoch(incident["detected"]) - stopped < 6 + 5, incident
    info = slurm_nodes.wait_job(job, DONE, timeout=300)
    assert info["JobState"] == "COMPLETED", info
    assert steps(project)[-1] == 1500


def test_an_unreadable_node_health_source_warns_once_and_detection_goes_on(
    project: Path, slurm_nodes: SlurmCluster
) -> None:
    _faults_env(project, "faults", slurm_nodes)
    overlay(
        project,
        "faults-missing",
        {
            "env": {"TRAINOPS_CKPT_EVERY": "50", "TRAINOPS_MAX_STEPS": "1500"},
            "faults": {"nodeHealth": [{"file": str(project / "no-such-dir" / "kern.log")}], "killAfter": "5s"},
        },
    )
    data = submit(project, "faults-missing")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    started = time.monotonic()
    _drill(project, "cuda-oom", run_id)
    info = slurm_nodes.wait_job(job, DONE, timeout=120)
    assert time.monotonic() - started < 60
    assert info["JobState"] == "FAILED"
    text = run("train", "logs", run_id, "-f", str(project / "trainops.yaml")).stdout
    assert text.count("cannot be read") == 1, text[-3000:]
