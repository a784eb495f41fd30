"""`trainops train run --local` supervises its trainer: a real process (tests/faults/
trainer_on_cue.py) that crashes, hangs or runs out of memory on cue. trainops must detect it,
classify it, restart a transient fault from the newest checkpoint, stop on one retrying
cannot fix, record each incident in the registry, and account the run's ETTR
(`train status RUN`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops import clock
from trainops.cli.output import duration_text
from trainops.faults import incidents as records
from trainops.faults.incidents import Incident
from trainops.manifest import load_manifest
from trainops.registry.context import Registries

REPO = Path(__file__).resolve().parents[2]
TRAINER = Path(__file__).resolve().parent / "trainer_on_cue.py"
STEPS, EVERY = 200, 50
HANG_TIMEOUT = 2.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "cue"},
        "spec": {
            "registry": f"file://{tmp_path / 'registry'}",
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [sys.executable, str(TRAINER), str(tmp_path / "cue"), str(STEPS), str(EVERY)],
                "checkpoint": {"layout": "trainops", "keep": {"last": 10}, "resume": "latest"},
                "faultTolerance": {"hangTimeout": f"{HANG_TIMEOUT:g}s", "maxRetry": 3},
                "faults": {"killAfter": "2s"},
            },
        },
    }
    (tmp_path / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def _trainops(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    return subprocess.run(
        [sys.executable, "-m", "trainops.cli.main", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _run(project: Path, run_id: str, cue: str) -> subprocess.CompletedProcess[str]:
    (project / "cue").write_text(cue)
    return _trainops(project, "train", "run", "--local", "--run-id", run_id, "--interval", "0.2", "-o", "json")


def _incidents(project: Path, run_id: str) -> list[Incident]:
    manifest = load_manifest(project / "trainops.yaml")
    with Registries.for_manifest(manifest) as registries:
        repository = records.incidents_repository(registries, registry=manifest.pipeline.spec.registry, pipeline="cue")
        return records.list_incidents(registries, repository=repository, run_id=run_id)


def _checkpoints(project: Path) -> list[str]:
    return sorted(p.name for p in (project / ".trainops" / "runs" / "cue" / "checkpoints").glob("step-*"))


def test_a_crash_restarts_the_trainer_from_the_newest_checkpoint(project: Path) -> None:
    out = _run(project, "crash", f"crash {EVERY * 2 + 20}")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["starts"], result["action"], result["exitCode"]) == (2, None, 0)
    assert not (project / "cue").exists()  # the trainer did reach the cue
    [incident] = _incidents(project, "crash")
    assert result["incidents"] == [incident.id]
    assert (incident.fault, incident.action, incident.source) == ("segfault", "restart", "exit")
    # it failed at step 120 after reporting 119; it resumed from the checkpoint of step 100
    assert (incident.last_step, incident.resumed_step, incident.steps_lost) == (119, 100, 19)
    assert incident.recovered is not None and clock.parse(incident.recovered) >= clock.parse(incident.detected)
    assert _checkpoints(project)[-1] == f"step-{STEPS:06d}"

    status = _trainops(project, "train", "status", "crash", "-o", "json")
    assert status.returncode == 0, status.stderr
    ettr = json.loads(status.stdout)["ettr"]
    assert ettr["starts"] == 2 and [i["id"] for i in ettr["incidents"]] == [incident.id]
    assert 0 < ettr["ettr"] <= 1 and ettr["productiveSeconds"] <= ettr["wallSeconds"]
    text = _trainops(project, "train", "status", "crash").stdout.splitlines()
    assert (
        text[0] == "crash  local  completed"
        and text[1] == f"  ettr    {ettr['ettr']:.3f}: " + text[1].split(": ", 1)[1]
    )
    assert all(re.match(r"^  [a-z]+ +\S", line) for line in text[1:]), text  # each label apart from its value
    _assert_phases(ettr, text, incident)
    shown = _trainops(project, "incidents", "show", incident.id).stdout.splitlines()
    rows = {line[2:12].strip(): line[12:] for line in shown if line.startswith("  ") and not line.startswith("    ")}
    assert rows["acted"] == clock.display(incident.acted) and rows["decided"] == clock.display(incident.detected)
    [mine] = [line for line in text if line.startswith(f"  phases  {incident.id} ")]
    assert rows["phases"] == "detect " + mine.split(": detect ", 1)[1], (shown, text)
    # the post-incident report: the action at its own time, the MTTR split as train status has it
    report = json.loads(_trainops(project, "incidents", "report", "crash", "-o", "json").stdout)
    [item] = report["incidents"]
    assert item["mttrPhases"] == ettr["incidents"][0]["phases"]
    assert item["phases"][2]["at"] == incident.acted and item["phases"][3]["at"] == incident.recovered
    told = _trainops(project, "incidents", "report", "crash").stdout.splitlines()
    assert f"  mttr      {duration_text(incident.mttr_seconds)}: detect " + mine.split(": detect ", 1)[1] in told, told


PHASES = ("detectSeconds", "decideSeconds", "rescheduleSeconds", "restoreSeconds", "firstStepSeconds")


def _assert_phases(ettr: dict[str, Any], text: list[str], incident: Incident) -> dict[str, float]:
    """`train status RUN` splits the incident's MTTR into its five phases, each known and
    not negative, adding up to it within rounding; the run's medians (one incident: the same)
    and a line each in the table."""
    [row] = ettr["incidents"]
    phases = row["phases"]
    assert set(phases) == set(PHASES) and all(phases[k] is not None and phases[k] >= 0 for k in PHASES), phases
    assert incident.mttr_seconds is not None and abs(sum(phases.values()) - incident.mttr_seconds) < 0.01, phases
    assert abs(row["mttrSeconds"] - incident.mttr_seconds) < 0.01
    assert ettr["mttrPhases"] == phases
    # the instants on the record: in order, the restart is this run's next start
    assert incident.acted and incident.restarted and incident.restore_ended and incident.recovered
    lines = [line for line in text if line.startswith("  phases  ")]
    assert lines[0].startswith("  phases  median: detect ") and "first step " in lines[0], text
    assert lines[1].startswith(f"  phases  {incident.id} ({incident.fault}, mttr "), text
    return phases


def test_a_crash_keeps_the_exception_as_evidence_and_a_stopped_run_is_not_awaiting_recovery(project: Path) -> None:
    out = _run(project, "bug", "raise 70")
    assert out.returncode == 9, out.stderr
    [incident] = _incidents(project, "bug")
    assert (incident.fault, incident.action, incident.recovered) == ("code-error", "stop", None)
    # the line that says what went wrong, before the status that says only that it did
    assert incident.evidence[0] == "ValueError: shapes (4, 8) and (16,) not aligned", incident.evidence
    assert "the trainer exited 1" in incident.evidence
    shown = _trainops(project, "incidents", "show", incident.id)
    assert shown.returncode == 0, shown.stderr
    recovered = [line for line in shown.stdout.splitlines() if line.strip().startswith("recovered")]
    assert recovered == ["  recovered - (the run was stopped)"], shown.stdout
    assert "    ValueError: shapes (4, 8) and (16,) not aligned" in shown.stdout.splitlines()


def test_a_hang_is_detected_after_hang_timeout_and_restarted(project: Path) -> None:
    out = _run(project, "hang", "hang 80")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["starts"] == 2
    [incident] = _incidents(project, "hang")
    assert (incident.fault, incident.action) == ("hang", "restart")
    assert (incident.last_step, incident.resumed_step) == (79, 50)
    # detected within hangTimeout + 5 s of the last progress (the trainer's step 79)
    assert (clock.parse(incident.detected) - clock.parse(incident.evidence_at)).total_seconds() <= HANG_TIMEOUT + 5
    status = _trainops(project, "train", "status", "hang", "-o", "json")
    assert status.returncode == 0, status.stderr
    text = _trainops(project, "train", "status", "hang").stdout.splitlines()
    _assert_phases(json.loads(status.stdout)["ettr"], text, _incidents(project, "hang")[0])
    assert _checkpoints(project)[-1] == f"step-{STEPS:06d}"


def test_an_out_of_memory_stops_the_run_with_the_diagnosis(project: Path) -> None:
    out = _run(project, "oom", "oom 60")
    assert out.returncode == 9, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: run oom stopped after 1 start(s): cuda-oom on ")
    assert "CUDA out of memory → stop" in last
    [incident] = _incidents(project, "oom")
    assert (incident.fault, incident.action, incident.recovered) == ("cuda-oom", "stop", None)
    assert any("CUDA out of memory" in line for line in incident.evidence)
    assert _checkpoints(project)[-1] == "step-000050"  # no restart trained further
