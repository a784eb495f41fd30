"""`trainops incidents` over a file:// registry holding incidents written by trainops.faults
(as the supervisor writes them): listing, showing, the class table (golden), bad ids."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from tests.cli.test_json_convention import bad_keys
from trainops import clock
from trainops.faults import incidents as records
from trainops.faults.incidents import Incident
from trainops.registry.context import Registries
from trainops_testing.cli import run

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "faults"
MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: tiny}
spec:
  registry: file://registry
  train:
    scheduler: local
    command: ["true"]
    faults:
      actions: {cuda-oom: restart}
      drainAfter: {incidents: 2, window: 1h}
"""


def _incident(n: int, fault: str, node: str, *, recovered: bool) -> Incident:
    moment = clock.now() - timedelta(minutes=10 - n)  # within drainAfter.window of now
    at = clock.iso(moment)
    extra = (
        {
            "recovered": clock.iso(moment + timedelta(seconds=9.5)),
            "resumed_from": "tiny/checkpoints:step-200",
            "resumed_step": 200,
        }
        if recovered
        else {}
    )
    return Incident(
        id=f"run-a.{n}",
        pipeline="tiny",
        run_id="run-a",
        job_id="7",
        fault=fault,
        detail="Xid 79: the GPU has fallen off the bus" if fault == "fell-off-bus" else "an NCCL collective timed out",
        source="node-health" if fault == "fell-off-bus" else "trainer",
        evidence=["NVRM: Xid (PCI:0000:3b:00): 79, pid=1"] if fault == "fell-off-bus" else ["Watchdog caught …"],
        node=node,
        action="drain" if fault == "fell-off-bus" else "restart",
        action_note="drained gpu-1; requeued job 7 excluding gpu-1" if fault == "fell-off-bus" else "restart",
        evidence_at=at,
        detected=clock.iso(moment + timedelta(seconds=1.2)),
        last_step=230,
        steps_lost=30 if recovered else None,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "trainops.yaml").write_text(MANIFEST)
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = records.incidents_repository(registries, registry=f"file://{tmp_path / 'registry'}", pipeline="tiny")
    for item in (
        _incident(1, "nccl-timeout", "gpu-1", recovered=True),
        _incident(2, "fell-off-bus", "gpu-1", recovered=False),
    ):
        records.save(registries, repository=repo, incident=item)
    return tmp_path


def test_ls_show_and_the_node_flag(project: Path) -> None:
    manifest = str(project / "trainops.yaml")
    listed = run("incidents", "ls", "run-a", "-f", manifest, "-o", "json")
    assert listed.code == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert [i["id"] for i in data["incidents"]] == ["run-a.1", "run-a.2"]
    expected = {
        "node": "gpu-1",
        "incidents": 2,
        "inWindow": 2,
        "flagged": True,
        "faults": ["fell-off-bus", "nccl-timeout"],
    }
    assert data["nodes"] == [expected]  # drainAfter: 2 within 1h
    text = run("incidents", "ls", "-f", manifest)
    assert text.code == 0 and "run-a.2" in text.stdout and "fell-off-bus" in text.stdout and "drain" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 80
    shown = run("incidents", "show", "run-a.1", "-f", manifest)
    assert shown.code == 0, shown.stderr
    assert "recovered" in shown.stdout and "not yet" not in shown.stdout
    assert "30 steps" in shown.stdout and "mttr      9.5s" in shown.stdout
    as_json = json.loads(run("incidents", "show", "run-a.2", "-f", manifest, "-o", "json").stdout)
    assert as_json["recovered"] is None and as_json["node"] == "gpu-1"


def test_classes_golden(project: Path) -> None:
    result = run("incidents", "classes", "-f", str(project / "trainops.yaml"))
    assert result.code == 0, result.stderr
    golden = GOLDEN / "classes.txt"
    if os.environ.get("TRAINOPS_UPDATE_GOLDEN"):
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()


def test_an_unknown_or_malformed_id_is_not_found_in_one_line(project: Path) -> None:
    for bad in ("run-a.9", "nonsense"):
        result = run("incidents", "show", bad, "-f", str(project / "trainops.yaml"))
        assert result.code == 4, (bad, result.stderr)
        assert len(result.stderr.strip().splitlines()) <= 2 and bad in result.stderr


def test_report_walks_each_incident_from_signal_to_recovery(project: Path) -> None:
    manifest = str(project / "trainops.yaml")
    result = run("incidents", "report", "run-a", "-f", manifest, "-o", "json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert not list(bad_keys(data)), list(bad_keys(data))
    first, second = data["incidents"]
    assert [p["phase"] for p in first["phases"]] == ["signal", "diagnosis", "action", "recovery"]
    assert first["bucket"] == "restart-app" and second["bucket"] == "drain-service"  # Xid 79: NVIDIA's RESTART_BM
    assert first["phases"][1]["seconds"] == 1.2 and first["phases"][3]["seconds"] == 8.3
    assert first["phases"][0]["evidence"] == ["Watchdog caught …"]
    assert second["phases"][3]["at"] is None and "not yet" in second["phases"][3]["text"]
    text = run("incidents", "report", "run-a", "-f", manifest)
    assert text.code == 0, text.stderr
    assert "run-a.2  fell-off-bus on gpu-1 → drain  (resolves: drain-service)" in text.stdout, text.stdout
    assert "NVRM: Xid (PCI:0000:3b:00): 79, pid=1" in text.stdout
    missing = run("incidents", "report", "no-such-run", "-f", manifest)
    assert missing.code == 4 and len(missing.stderr.strip().splitlines()) <= 2, missing.stderr


def test_one_class_shows_its_xids_signals_and_lines(project: Path) -> None:
    manifest = str(project / "trainops.yaml")
    data = json.loads(run("incidents", "classes", "fell-off-bus", "-f", manifest, "-o", "json").stdout)
    assert data["bucket"] == "drain-service" and data["action"] == "drain"
    assert [(x["xid"], x["nvidia"]) for x in data["xids"]] == [(79, "RESTART_BM")]
    assert "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" in data["counters"] and "DCGM_FR_FALLEN_OFF_BUS" in data["health"]
    text = run("incidents", "classes", "nvlink", "-f", manifest)
    assert text.code == 0 and "Xid 74" in text.stdout and "recalled" in text.stdout, text.stdout
    assert "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL" in text.stdout
    unknown = run("incidents", "classes", "gremlins", "-f", manifest)
    assert unknown.code != 0 and "gremlins" in unknown.stderr and len(unknown.stderr.strip().splitlines()) <= 2


def test_dcgm_counters_turn_on_what_the_exporter_leaves_off() -> None:
    result = run("incidents", "dcgm-counters")
    assert result.code == 0, result.stderr
    rows = [line.split(",", 2) for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert all(len(r) == 3 and r[0].startswith("DCGM_FI_") and r[1].strip() in ("gauge", "counter") for r in rows)
    fields = [r[0] for r in rows]
    assert len(fields) == len(set(fields))
    for wanted in (  # commented out in dcgm-exporter's etc/default-counters.csv
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
    ):
        assert wanted in fields
    assert "DCGM_FI_DEV_XID_ERRORS" in fields and "DCGM_FI_DEV_GPU_TEMP" in fields  # its defaults stay
