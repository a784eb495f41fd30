"""Check before excluding, on the one-node Slurm cluster: a trainer killed on a node that still
answers is not a lost node, and no exclusion leaves a job with nowhere to run.

Before, a SIGKILLed trainer was `node-lost`: the job was requeued with ExcNodeList= its only
node and pended for ever (Reason=BadConstraints). Checked from the outside: the incident
(`trainops incidents`), Slurm's view of the job (no exclusion, no requeue, COMPLETED), the
checkpoints in the registry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.slurm.test_fault_tolerance import logs, wait_for_checkpoint
from tests.slurm.test_faults import _drill, _faults_env, _incidents, _wait_incident
from tests.slurm.test_train_slurm import DONE, project, steps, submit
from trainops.slurm.client import SlurmHost
from trainops.slurm.nodes import check_node
from trainops_testing.cli import run
from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]

pytestmark = pytest.mark.slow

# Enough that the trainer is still running when the drill lands (1500 steps ended first on a quiet machine).
STEPS = 6000


def _env(root: Path, slurm: SlurmCluster) -> None:
    """Env `faults` of tests/slurm/test_faults.py, shorter."""
    _faults_env(root, "faults", slurm)
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    doc["environments"]["faults"]["train"]["env"]["TRAINOPS_MAX_STEPS"] = str(STEPS)
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def _excluded(info: dict[str, str]) -> str:
    return "" if info.get("ExcNodeList") in (None, "", "(null)") else info["ExcNodeList"]


def test_a_killed_trainer_on_a_healthy_only_node_restarts_in_place(project: Path, slurm: SlurmCluster) -> None:
    _env(project, slurm)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    check = check_node(SlurmHost(), job_id=job, node=slurm.host)  # what the supervisor asks
    assert (check.answers, check.left, check.needed) == (True, 0, 1), check
    _drill(project, "node-lost", run_id)  # SIGKILL to every trainer process
    incident = _wait_incident(project, run_id)[0]
    assert (incident["fault"], incident["action"]) == ("task-killed", "restart"), incident
    assert f"scheduler: node {slurm.host} State=" in "\n".join(incident["evidence"]), incident  # type: ignore[arg-type]
    info = slurm.wait_job(job, DONE, timeout=300)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "0", (info, logs(project, run_id)[-3000:])
    assert _excluded(info) == "", info
    assert steps(project)[-1] == STEPS
    assert _incidents(project, run_id)[0]["recovered"] is not None
    result = run("incidents", "report", run_id, "-f", str(project / "trainops.yaml"), "-o", "json")
    assert result.code == 0, result.stderr
    (item,) = json.loads(result.stdout)["incidents"]
    assert (item["fault"], item["bucket"]) == ("task-killed", "restart-app"), item
    signal, diagnosis, action, recovery = item["phases"]
    assert action["text"].startswith("restart"), action
    assert "the trainer was killed (exit 137)" in signal["text"] or "Killed" in signal["text"], signal
    assert f"{slurm.host} answers the scheduler" in diagnosis["text"], diagnosis
    assert recovery["at"] is not None and recovery["seconds"] > 0, recovery


def test_a_requeue_that_would_exclude_the_last_node_restarts_in_place_flagged(
    project: Path, slurm: SlurmCluster
) -> None:
    _env(project, slurm)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    _drill(project, "xid", run_id, "--node", slurm.host, "--xid", "74")  # NVLink error: requeue, by the table
    incident = _wait_incident(project, run_id)[0]
    assert (incident["fault"], incident["action"], incident["nodeFlagged"]) == ("nvlink", "restart", True), incident
    assert "would leave 0 other usable node(s)" in str(incident["actionNote"]), incident
    info = slurm.wait_job(job, DONE, timeout=300)
    assert info["JobState"] == "COMPLETED" and _excluded(info) == "", info
    assert steps(project)[-1] == STEPS
    shown = run("incidents", "show", str(incident["id"]), "-f", str(project / "trainops.yaml")).stdout
    assert "(flagged: see the action)" in shown, shown


def test_a_drain_of_the_last_node_stops_with_the_diagnosis(project: Path, slurm: SlurmCluster) -> None:
    _env(project, slurm)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    _drill(project, "xid", run_id, "--node", slurm.host, "--xid", "79")  # off the bus: drain, by the table
    info = slurm.wait_job(job, DONE, timeout=120)
    assert info["JobState"] == "FAILED" and _excluded(info) == "", info
    incident = _incidents(project, run_id)[0]
    assert (incident["fault"], incident["action"], incident["nodeFlagged"]) == ("fell-off-bus", "stop", True)
    assert "last node the job can run on" in info.get("Comment", ""), info
    assert not slurm.node_state().startswith("DRAIN"), slurm.node_state()  # a person decides, the job is gone


def test_status_shows_a_requeued_job_that_can_never_start(project: Path, slurm: SlurmCluster) -> None:
    _env(project, slurm)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    # what the supervisor did before it asked the scheduler: requeue excluding the only node
    slurm.run("scontrol", "requeue", job, check=True)
    slurm.run("scontrol", "update", f"JobId={job}", f"ExcNodeList={slurm.host}", check=True)
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what=f"job {job}'s old steps gone", interval=0.3)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now+3", check=True)  # past the requeue delay
    args = ("train", "status", run_id, "-f", str(project / "trainops.yaml"), "--env", "faults")
    try:
        wait_for(
            lambda: json.loads(run(*args, "-o", "json").stdout).get("unschedulable") is not None,
            timeout=60,
            what=f"status naming the unschedulable job ({slurm.job(job).get('Reason')})",
            interval=0.5,
        )
        status = json.loads(run(*args, "-o", "json").stdout)
        assert status["state"] == "PENDING", status
        assert f"ExcNodeList={slurm.host}" in status["unschedulable"], status
        assert f"scontrol update JobId={job} ExcNodeList=" in status["unschedulable"], status
        text = run(*args).stdout
        assert "  blocked Reason=BadConstraints" in text, text
        # an incident of its own, recorded once however often status looks
        [incident] = [i for i in _incidents(project, run_id) if i["fault"] == "unschedulable"]
        assert status["incident"] == incident["id"] and f"(incident {incident['id']})" in text, (status, text)
        assert (incident["action"], incident["source"], incident["bucket"]) == ("stop", "scheduler", "drain-service")
        assert f"scontrol show job {job}: JobState=PENDING Reason=BadConstraints ExcNodeList={slurm.host}" in str(
            incident["evidence"]
        ), incident
        assert incident["recovered"] is None
        assert len([i for i in _incidents(project, run_id) if i["fault"] == "unschedulable"]) == 1
        # the exclusion cleared, the job runs: the incident is closed by the next look
        slurm.run("scontrol", "update", f"JobId={job}", "ExcNodeList=", check=True)
        wait_for(lambda: json.loads(run(*args, "-o", "json").stdout)["state"] == "RUNNING", timeout=90,
                 what=f"job {job} running again", interval=0.5)  # fmt: skip
        [closed] = [i for i in _incidents(project, run_id) if i["fault"] == "unschedulable"]
        assert closed["recovered"] is not None, closed
    finally:
        slurm.run("scancel", job)
        slurm.wait_job(job, DONE, timeout=60)
