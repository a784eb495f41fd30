"""The supervisor of `train run --local` serves the run's Prometheus metrics, a real Prometheus scrapes
them and evaluates the training SLOs' rules: a run that slows down past its step-time SLO pages."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from trainops.manifest import load_manifest
from trainops.rollout.render import rule_file_of
from trainops.slo.exporter import MetricsServer, TrainingMetrics
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for

TRAINER = Path(__file__).resolve().parent / "paced_trainer.py"
RUN = "paced-1"


def manifest(root: Path, port: int) -> Path:
    fast = {"window": "1h"}  # page windows 5 s and 4 s
    doc: dict[str, Any] = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "paced"},
        "spec": {
            "registry": f"file://{root / 'registry'}",
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                # 100 steps of 50 ms, then 100 steps of 200 ms: over the 100 ms step-time SLO
                "command": [sys.executable, str(TRAINER), "200", "20", "0.05", "0.2", "100"],
                "checkpoint": {"layout": "trainops", "keep": {"last": 3}, "resume": "none"},
                "metricsAddress": f"{LOOPBACK}:{port}",
            },
            "slo": {
                "scrapeInterval": "1s",
                "evaluationInterval": "1s",
                "training": {
                    "ettr": {"objective": 50, **fast},
                    "stepTime": {"threshold": "100ms", "objective": 99, **fast},
                    "checkpointAge": {"threshold": "1m", "objective": 99, **fast},
                },
            },
        },
    }
    path = root / "trainops.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def firing(prometheus: Prometheus, slo: str) -> bool:
    return bool(prometheus.query(f'ALERTS{{alertname="SLOBurnRatePage",slo="{slo}",run="{RUN}",alertstate="firing"}}'))


def value(prometheus: Prometheus, query: str) -> float | None:
    result = prometheus.query(query)
    return float(result[0]["value"][1]) if result else None


def test_a_supervised_run_exports_its_metrics_and_a_slow_down_pages(tmp_path: Path) -> None:
    port = free_port()
    path = manifest(tmp_path, port)
    rules = rule_file_of(load_manifest(path))
    prometheus = Prometheus(tmp_path / "prom", targets={"paced-train": [f"{LOOPBACK}:{port}"]}, rules=rules,
                                alertmanager=None)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    try:
        prometheus.start()
        # Prometheus hands its targets to the scrapers some seconds after it is ready: from the
        # first scrape (of nothing yet: up 0) on, the run's every phase is seen
        wait_for(lambda: value(prometheus, "up") is not None, timeout=60, what="the first scrape")
    except ServiceError as err:
        prometheus.stop()
        pytest.fail(str(err), pytrace=False)
    run = subprocess.Popen(
        [sys.executable, "-m", "trainops.cli.main", "train", "run", "--local", "--run-id", RUN, "--interval", "0.2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # while it is fast: its exposition as Prometheus' text format, and the step-time SLI good
        wait_for(lambda: (value(prometheus, f'trainops_train_step{{run="{RUN}"}}') or 0) >= 10, timeout=60,
                 what="the run's steps scraped", proc=None)  # fmt: skip
        text = requests.get(f"http://{LOOPBACK}:{port}/metrics", timeout=5).text
        assert f'trainops_train_step{{pipeline="paced",run="{RUN}"}}' in text
        assert "# TYPE trainops_train_restarts_total counter" in text
        step_seconds = value(prometheus, f'trainops_train_step_seconds{{run="{RUN}"}}')
        assert step_seconds is not None and 0.04 < step_seconds < 0.1
        tokens = value(prometheus, f'trainops_train_tokens_per_second{{run="{RUN}"}}')
        assert tokens is not None and 40000 < tokens < 100000  # 4096 tokens a step
        assert value(prometheus, f'trainops_train_loss{{run="{RUN}"}}') is not None
        assert value(prometheus, f'trainops_train_restarts_total{{run="{RUN}"}}') == 0
        ettr = value(prometheus, f'trainops_train_ettr{{run="{RUN}"}}')
        assert ettr is not None and 0 < ettr <= 1
        assert not firing(prometheus, "train-step-time")
        # past step 100 each step takes 200 ms: the step-time SLO burns its budget 100× and pages
        wait_for(lambda: firing(prometheus, "train-step-time"), timeout=60, what="the step-time page")
        age = value(prometheus, f'trainops_train_checkpoint_age_seconds{{run="{RUN}"}}')
        assert age is not None and age < 20  # a checkpoint every 20 steps: never a minute old
        assert not firing(prometheus, "train-checkpoint-age")
    finally:
        _out, err = run.communicate(timeout=120)
        prometheus.stop()
    assert run.returncode == 0, err
    assert f"the run's Prometheus metrics: http://{LOOPBACK}:{port}/metrics" in err
    with pytest.raises(requests.ConnectionError):  # the supervisor stopped serving with the run
        requests.get(f"http://{LOOPBACK}:{port}/metrics", timeout=5)


def test_a_run_serving_every_address_names_its_host() -> None:
    """train.metricsAddress 0.0.0.0:PORT (a Slurm batch host scraped from elsewhere): the URL said
    in the job's log names the host, where a Prometheus can reach it, not 0.0.0.0."""
    metrics = TrainingMetrics(pipeline="paced", run_id=RUN)
    metrics.progress(7)
    server = MetricsServer(metrics, "0.0.0.0:0")
    try:
        port = server.server.server_address[1]
        assert server.url == f"http://{socket.gethostname()}:{port}/metrics"
        text = requests.get(server.url, timeout=5).text
    finally:
        server.close()
    assert f'trainops_train_step{{pipeline="paced",run="{RUN}"}} 7.0' in text


def test_the_run_is_rank_zeros_lines_not_the_other_ranks_progress() -> None:
    """Under srun every task's output reaches the supervisor: the other ranks' progress lines
    (`{"rank": 1, "step": …}`, for the straggler detector) neither move the step back nor set it."""
    metrics = TrainingMetrics(pipeline="paced", run_id=RUN)
    metrics.on_line('{"rank":0,"step":400,"node":"n1"}')
    metrics.on_line('{"rank":1,"step":380,"node":"n2"}')
    metrics.on_line('{"rank":1,"step":420,"node":"n2"}')
    assert metrics.step == 400
    metrics.on_line('{"step":420,"train_loss":1.5,"tokens_per_second":9000.0}')
    assert (metrics.step, metrics.loss, metrics.tokens_per_second) == (420, 1.5, 9000.0)
