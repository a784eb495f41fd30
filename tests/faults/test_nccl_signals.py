"""NCCL's own signals under `trainops train run --local`, written in their real formats by a
test trainer (tests/faults/nccl_trainer.py; no GPU here): the NCCL Inspector's Prometheus files
name a rank whose collectives lag as a straggler (a second source beside the trainer's lines,
which carry no rank here), and the flight-recorder dumps of a hang are read into the hang
incident's evidence. A dump that is not one is refused without running anything."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from trainops.faults import incidents as records
from trainops.faults.incidents import Incident
from trainops.faults.nccl import flight_recorder_lines, read_dump
from trainops.manifest import load_manifest
from trainops.registry.context import Registries

TRAINER = Path(__file__).resolve().parent / "nccl_trainer.py"
HOST = socket.gethostname().split(".")[0]


def _project(tmp_path: Path, *, steps: int) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "nccl"},
        "spec": {
            "registry": f"file://{tmp_path / 'registry'}",
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [sys.executable, str(TRAINER), str(tmp_path / "cue"), "4", str(steps)],
                "env": {"INSPECTOR_DIR": str(tmp_path / "inspector"), "FR_PREFIX": str(tmp_path / "nccl_trace_rank_")},
                "checkpoint": {"layout": "trainops", "keep": {"last": 3}, "resume": "latest"},
                "faultTolerance": {"hangTimeout": "3s", "maxRetry": 3},
                "faults": {
                    "killAfter": "2s",
                    "slowNode": {"moveCost": "3s",
                                 "ncclInspector": [str(tmp_path / "inspector" / "nccl_inspector_metrics_*.prom")]},
                    "flightRecorder": str(tmp_path / "nccl_trace_rank_*"),
                },
            },
        },
    }  # fmt: skip
    (tmp_path / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def _run(project: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    argv = [sys.executable, "-m", "trainops.cli.main", "train", "run", "--local", "--run-id", run_id]
    return subprocess.run([*argv, "--interval", "0.2"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def _incidents(project: Path, run_id: str) -> list[Incident]:
    manifest = load_manifest(project / "trainops.yaml")
    with Registries.for_manifest(manifest) as registries:
        repository = records.incidents_repository(registries, registry=manifest.pipeline.spec.registry,
                                                  pipeline="nccl")  # fmt: skip
        return records.list_incidents(registries, repository=repository, run_id=run_id)


def test_a_rank_whose_collectives_lag_is_left_by_nccls_own_account(tmp_path: Path) -> None:
    project = _project(tmp_path, steps=2000)
    (project / "cue").write_text("slow 3")
    result = _run(project, "slow-1")
    assert result.returncode != 0, result.stderr  # a local run needs another node: it stops with the diagnosis
    [incident] = _incidents(project, "slow-1")
    assert (incident.fault, incident.source, incident.node, incident.action) == ("slow-node", "nccl", HOST,
                                                                                   "requeue")  # fmt: skip
    assert incident.evidence[0].startswith(f"by its NCCL collectives, rank 3 on {HOST} is 2.0"), incident.evidence
    compared = [line for line in incident.evidence if line.startswith("NCCL Inspector: rank 3")]
    assert compared and "AllReduce coll_sn " in compared[0] and "busbw 240 GB/s" in compared[0], incident.evidence
    assert "(peers' median busbw 480 GB/s)" in compared[0]


def test_a_hang_carries_the_flight_recorder_dumps_in_its_evidence(tmp_path: Path) -> None:
    project = _project(tmp_path, steps=60)
    (project / "cue").write_text("hang 30")
    result = _run(project, "hang-1")
    assert result.returncode == 0, result.stderr  # restarted in place, the run completed
    [incident] = _incidents(project, "hang-1")
    assert (incident.fault, incident.action) == ("hang", "restart")
    lines = [line for line in incident.evidence if line.startswith("flight recorder:")]
    assert lines == [
        "flight recorder: dumps of rank(s) 0, 1, 2, 3",
        "flight recorder: rank(s) 0, 1, 2 wait in nccl:all_reduce seq 59 of process group 0/default_pg (started)",
        "flight recorder: never entered nccl:all_reduce seq 59 of process group 0/default_pg: rank 3 (last completed "
        "seq 58)",
    ], incident.evidence


def test_a_dump_that_is_not_one_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    # a pickle that would call os.system when loaded by a careless reader
    evil = pickle.dumps(type("Evil", (), {"__reduce__": lambda self: (os.system, (f"touch {marker}",))})())
    (tmp_path / "nccl_trace_rank_0").write_bytes(evil)
    (tmp_path / "nccl_trace_rank_1").write_text("{torn")
    refused = read_dump(tmp_path / "nccl_trace_rank_0")
    assert isinstance(refused, str) and "holds no" in refused and "system" in refused, refused
    lines, bad = flight_recorder_lines(str(tmp_path / "nccl_trace_rank_*"), since=0)
    assert lines == [] and len(bad) == 2 and not marker.exists(), bad
