"""The training pods serve what their PodMonitor scrapes: the checkpoint sidecar, run with the
command the example renders for it, serves the run's metrics from the checkpoints it pushes,
and a real Prometheus scrapes them; a Kueue worker's idle sidecar answers with no series."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.render.helpers import RUN_ID, only, render, templates, variant
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for


def _sidecar(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rendered PodMonitor's endpoint and the leader pod's checkpoint sidecar."""
    rendered = render(variant(tmp_path / "project"))
    monitor = only(rendered, "PodMonitor")
    job = next(o for o in rendered.objects if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano"))
    leader = templates(job)["leader"]
    sidecar = next(c for c in leader["spec"]["initContainers"] if c["name"] == "ckpt-watch")
    return monitor["spec"]["podMetricsEndpoints"][0], sidecar


def _argv(sidecar: dict[str, Any], *, directory: Path, registry: Path, address: str) -> list[str]:
    """The sidecar's rendered command, run here: its checkpoint directory, a registry and an
    address of this machine's, and a quick scan (the rendered one waits for a trainer's pace)."""
    argv = list(sidecar["command"])
    assert argv[:3] == ["trainops", "ckpt", "watch"]
    argv[3] = str(directory)
    argv[argv.index("--repository") + 1] = f"file://{registry}/tiny-llm/checkpoints"
    argv[argv.index("--metrics-address") + 1] = address
    return [sys.executable, "-m", "trainops.cli.main", *argv[1:], "--interval", "0.2", "--settle", "0.2"]


def _checkpoint(directory: Path, step: int) -> None:
    temp = directory / f".tmp-step-{step:06d}"
    temp.mkdir(parents=True)
    state = {"step": step, "metrics": {"train_loss": round(4.0 / step, 6)}}
    (temp / "trainer_state.json").write_text(json.dumps(state))
    temp.rename(directory / f"step-{step:06d}")


def value(prometheus: Prometheus, query: str) -> float | None:
    result = prometheus.query(query)
    return float(result[0]["value"][1]) if result else None


def test_the_pods_sidecar_serves_the_port_its_podmonitor_scrapes(tmp_path: Path) -> None:
    endpoint, sidecar = _sidecar(tmp_path)
    ports = {p["name"]: p["containerPort"] for p in sidecar.get("ports", [])}
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    command = sidecar["command"]
    assert command[command.index("--metrics-address") + 1] == f"0.0.0.0:{ports[endpoint['port']]}"
    env = {e["name"]: e["value"] for e in sidecar["env"] if "value" in e}
    assert env["TRAINOPS_PIPELINE"] == "tiny-llm" and env["TRAINOPS_RUN_ID"] == RUN_ID

    directory = tmp_path / "ckpt"
    directory.mkdir()
    leader, worker = free_port(), free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")} | env
    prometheus = Prometheus(tmp_path / "prom", targets={"train": [f"{LOOPBACK}:{leader}", f"{LOOPBACK}:{worker}"]},
                                rules={"groups": []}, alertmanager=None)  # fmt: skip
    procs = []
    try:
        prometheus.start()
        procs.append(subprocess.Popen(
            _argv(sidecar, directory=directory, registry=tmp_path / "registry", address=f"{LOOPBACK}:{leader}"),
            cwd=tmp_path, env=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))  # fmt: skip
        # a Kueue worker's sidecar: the same command with --leader-only on node rank 1
        procs.append(subprocess.Popen(
            [*_argv(sidecar, directory=directory, registry=tmp_path / "registry", address=f"{LOOPBACK}:{worker}"),
             "--leader-only"],
            cwd=tmp_path, env=base | {"TRAINOPS_NODE_RANK": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True))  # fmt: skip
        wait_for(lambda: value(prometheus, "sum(up)") == 2, timeout=60, what="both sidecars scraped")
        for step in (10, 20, 30):
            _checkpoint(directory, step)
            wait_for(lambda step=step: value(prometheus, f'trainops_train_step{{run="{RUN_ID}"}}') == step,
                     timeout=60, what=f"step {step} scraped")  # fmt: skip
            time.sleep(0.5)  # the trainer's pace: 10 steps in half a second and the push
        series = prometheus.query(f'{{__name__=~"trainops_train_.*",run="{RUN_ID}"}}')
        assert {s["metric"]["instance"] for s in series} == {f"{LOOPBACK}:{leader}"}  # the idle one has none
        assert {s["metric"]["pipeline"] for s in series} == {"tiny-llm"}
        assert value(prometheus, f'trainops_train_loss{{run="{RUN_ID}"}}') == round(4.0 / 30, 6)
        step_seconds = value(prometheus, f'trainops_train_step_seconds{{run="{RUN_ID}"}}')
        assert step_seconds is not None and 0.02 < step_seconds < 0.3, step_seconds
        age = value(prometheus, f'trainops_train_checkpoint_age_seconds{{run="{RUN_ID}"}}')
        assert age is not None and age < 10, age
        text = requests.get(f"http://{LOOPBACK}:{worker}/metrics", timeout=5).text
        assert text == ""
    except ServiceError as err:
        pytest.fail(str(err), pytrace=False)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=60) for proc in procs]
        prometheus.stop()
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "pushed step-000030" in outputs[0][0]
    with pytest.raises(requests.ConnectionError):  # the metrics end with the sidecar
        requests.get(f"http://{LOOPBACK}:{leader}/metrics", timeout=5)
