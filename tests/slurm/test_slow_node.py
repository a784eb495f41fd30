"""A slow rank on real Slurm: tiny-llm on two of the three-node cluster's nodes, one task per
node, each task with its RANK and WORLD_SIZE from srun (the supervisor exports Slurm's per-task
variables under torch.distributed's names), rank 1 throttled 2× by `trainops drill
slow-node`. The supervisor names the rank and its node, tolerates it until it has cost
train.faults.slowNode.moveCost, then requeues the job with that node excluded; the job
starts again on the other two nodes from the newest checkpoint and completes. Checked
from the outside: Slurm's view of the job and the incident."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.slurm.test_fault_tolerance import logs, wait_for_checkpoint
from tests.slurm.test_faults import _drill, _faults_env, _wait_incident
from tests.slurm.test_train_slurm import DONE, project, steps, submit
from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]

pytestmark = pytest.mark.slow

STEPS = 20000  # the throttled run must outlast detection (its window, `enter` checks) and the move cost


def _env(root: Path, slurm: SlurmCluster) -> None:
    _faults_env(root, "faults", slurm, slowNode={"moveCost": "4s"})
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    train = doc["environments"]["faults"]["train"]
    train["nodes"] = 2
    train["env"].update(
        {"TRAINOPS_MAX_STEPS": str(STEPS), "TRAINOPS_CKPT_EVERY": "500", "TINY_LLM_PROGRESS_EVERY": "20"}
    )
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def _start_again(slurm: SlurmCluster, job: str) -> None:
    """Once the requeued job pends and its old steps are gone, let it start now rather than
    after Slurm's requeue delay (the nodes it may use are idle: the excluded one is not)."""
    wait_for(
        lambda: slurm.job(job).get("JobState") == "PENDING" and int(slurm.job(job).get("Restarts", 0)) >= 1,
        timeout=120,
        what=f"job {job} requeued",
        interval=0.3,
    )
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what=f"job {job}'s old steps gone", interval=0.3)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now+3", check=True)


def test_each_task_has_its_rank_and_a_slow_one_is_left_for_another_node(
    project: Path, slurm_nodes: SlurmCluster
) -> None:
    _env(project, slurm_nodes)
    data = submit(project, "faults")
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for_checkpoint(project, above=0)
    text = logs(project, run_id)
    ranks = {int(rank): node for rank, node in re.findall(r'\{"rank":(\d+),"step":\d+,"node":"([^"]+)"\}', text)}
    assert sorted(ranks) == [0, 1] and ranks[0] != ranks[1], text[-3000:]  # srun's tasks: rank 0 and 1, a node each
    _drill(project, "slow-node", run_id, "--rank", "1", "--duty", "0.5", "--seconds", "120")
    incident = _wait_incident(project, run_id, timeout=120)[0]
    assert (incident["fault"], incident["action"]) == ("slow-node", "requeue"), logs(project, run_id)[-3000:]
    assert incident["node"] == ranks[1], (incident, ranks)
    assert f"rank 1 on {ranks[1]}" in str(incident["evidence"][0]), incident  # type: ignore[index]
    _start_again(slurm_nodes, job)
    info = slurm_nodes.wait_job(job, DONE, timeout=600)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, logs(project, run_id)[-3000:])
    assert info["ExcNodeList"] == ranks[1], info  # the slow node excluded; the job ran on the two others
    assert ranks[1] not in info["NodeList"], info
    assert steps(project)[-1] == STEPS
