"""The training SLIs of a Slurm job: the supervisor on its batch host (`trainops train run
--slurm`, which the rendered sbatch script execs) serves the run's Prometheus metrics at
train.metricsAddress. tiny-llm trains through the one-node cluster with port 0 (a free one);
the address is the one the job's log names (`trainops train logs`), scraped while it trains:
the step, the step time and tokens/s, the checkpoint age all move, and the supervisor stops
serving with the job."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import requests

from tests.slurm.test_train_slurm import DONE, overlay, project, submit
from trainops_testing.cli import run
from trainops_testing.services import LOOPBACK, wait_for
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]

pytestmark = pytest.mark.slow

ANNOUNCED = re.compile(r"the run's Prometheus metrics: (http://\S+/metrics)")
SAMPLE = re.compile(r'^(trainops_train_\w+)\{pipeline="tiny-llm",run="([^"]+)"\} (\S+)$', re.MULTILINE)


def scrape(url: str, run_id: str) -> dict[str, float]:
    text = requests.get(url, timeout=5).text
    return {name: float(value) for name, run_of, value in SAMPLE.findall(text) if run_of == run_id}


def test_a_slurm_job_serves_its_training_metrics_where_its_log_says(project: Path, slurm: SlurmCluster) -> None:
    env = {"TRAINOPS_MAX_STEPS": "10000000", "TRAINOPS_CKPT_EVERY": "1500", "TINY_LLM_LOG_EVERY": "100"}
    overlay(project, "metrics", {"metricsAddress": f"{LOOPBACK}:0", "env": env})
    manifest = str(project / "trainops.yaml")
    data = submit(project, "metrics")
    job, run_id = str(data["jobId"]), str(data["runId"])
    try:
        urls: list[str] = []

        def announced() -> bool:
            urls[:] = ANNOUNCED.findall(run("train", "logs", run_id, "-f", manifest).stdout)
            return bool(urls)

        wait_for(announced, timeout=120, what="the job's log naming its metrics address", interval=0.5)
        (url,) = urls
        assert url.startswith(f"http://{LOOPBACK}:") and not url.startswith(f"http://{LOOPBACK}:0/"), url
        seen: list[dict[str, float]] = []

        def moved() -> bool:
            seen.append(scrape(url, run_id))
            steps = [s["trainops_train_step"] for s in seen if "trainops_train_step" in s]
            ages = [s["trainops_train_checkpoint_age_seconds"] for s in seen]
            tokens = {s["trainops_train_tokens_per_second"] for s in seen if "trainops_train_tokens_per_second" in s}
            # the step went on; tokens/s is the trainer's, interval by interval; a pushed
            # checkpoint set the age back (it only grows between pushes)
            return len(set(steps)) >= 3 and len(tokens) >= 2 and any(b < a for a, b in itertools.pairwise(ages))

        wait_for(moved, timeout=180, what="step, tokens/s and checkpoint age moving", interval=0.5)
        last = seen[-1]
        steps = [s["trainops_train_step"] for s in seen if "trainops_train_step" in s]
        assert steps == sorted(steps) and steps[-1] % 100 == 0, steps  # the trainer's metrics lines, every 100 steps
        assert 0 < last["trainops_train_step_seconds"] < 5, last
        assert last["trainops_train_tokens_per_second"] > 0, last
        assert last["trainops_train_checkpoint_age_seconds"] < 120, last
        assert last["trainops_train_restarts_total"] == 0, last
        assert 0 < last["trainops_train_ettr"] <= 1, last
        assert "trainops_train_loss" in last, last
    finally:
        cancelled = run("train", "cancel", run_id, "-f", manifest)
    assert cancelled.code == 0, cancelled.stderr
    info = slurm.wait_job(job, DONE, timeout=120)
    assert info["JobState"] == "CANCELLED", info
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what="the job's steps gone", interval=0.3)
    with pytest.raises(requests.ConnectionError):  # the supervisor stopped serving with the job
        requests.get(url, timeout=5)
