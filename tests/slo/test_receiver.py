"""`trainops alerts serve`'s refusals: each one line, nothing recorded; `slo status` without a Prometheus."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from trainops.faults.query import list_incidents
from trainops.manifest import load_manifest
from trainops.ui.alert_receiver import Receiver
from trainops_testing.cli import run
from trainops_testing.projects import IMAGE, Project, make_project, slo_overlay
from trainops_testing.services import LOOPBACK

TOKEN = "t0ken"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = make_project(tmp_path / "p", slo_overlay(f"http://{LOOPBACK}:1"))
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v2"):
        assert run("rollout", *project.cli("start", release, "--image", IMAGE)).code == 0
    return project


@pytest.fixture
def receiver(project: Project) -> Iterator[Receiver]:
    server = Receiver(load_manifest(project.manifest), host=LOOPBACK, port=0, token=TOKEN).start()
    yield server
    server.close()


def alert(slo: str = "tiny-llm-ttft", service: str = "tiny-llm-canary", status: str = "firing") -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "SLOBurnRatePage", "slo": slo, "pipeline": "tiny-llm", "service": service,
                   "severity": "page"},
        "annotations": {"summary": "burns", "burn_rate": "20", "query": "q"},
        "startsAt": "2026-12-05T02:00:00.123456789Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": f"fp-{slo}-{service}",
        "generatorURL": "http://prometheus/graph",
    }  # fmt: skip


def body(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {"version": "4", "status": "firing", "receiver": "trainops", "alerts": list(alerts)}


def post(receiver: Receiver, data: Any, *, token: str | None = TOKEN, raw: bytes | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payload = raw if raw is not None else json.dumps(data).encode()
    return requests.post(receiver.url, data=payload, headers=headers, timeout=30)


def recorded(project: Project) -> list[Any]:
    return list_incidents(load_manifest(project.manifest)).incidents


def test_a_firing_alert_is_recorded_once_and_resolved_in_place(receiver: Receiver, project: Project) -> None:
    first = post(receiver, body(alert()))
    assert first.status_code == 200, first.text
    assert first.json() == {"recorded": ["v2.1"], "ignored": 0}
    again = post(receiver, body(alert(), {"status": "firing", "labels": {"alertname": "Other"}, "startsAt":
                                          "2026-12-05T02:00:00Z", "fingerprint": "x"}))  # fmt: skip
    assert again.json() == {"recorded": ["v2.1"], "ignored": 1}  # the same alert: the same incident
    resolved = alert(status="resolved")
    resolved["endsAt"] = "2026-12-05T02:10:00Z"
    assert post(receiver, body(resolved)).status_code == 200
    (incident,) = recorded(project)
    assert incident.id == "v2.1" and incident.recovered == "2026-12-05T02:10:00.000Z"
    assert incident.evidence_at == "2026-12-05T02:00:00.123Z" and incident.burn_rate == 20


@pytest.mark.parametrize(
    ("token", "raw", "data", "status", "says"),
    [
        (None, None, body(alert()), 401, "missing or wrong token"),
        ("wrong", None, body(alert()), 401, "missing or wrong token"),
        (TOKEN, b"{not json", None, 400, "not an Alertmanager webhook notification"),
        (TOKEN, None, {"version": "4", "status": "firing"}, 400, "alerts"),
        (TOKEN, None, body(alert(), {**alert(service="tiny-llm-stable"), "startsAt": "yesterday"}), 400,
         "'yesterday' is not an RFC 3339 time"),
        (TOKEN, None, body(alert(), alert(slo="nope")), 422, "alert names SLO 'nope', which trainops.yaml does not"),
        (TOKEN, None, body(alert(service="other-canary")), 422, "is neither tiny-llm-canary nor tiny-llm-stable"),
    ],
)  # fmt: skip
def test_refusals_record_nothing(
    receiver: Receiver, project: Project, token: str | None, raw: bytes | None, data: Any, status: int, says: str
) -> None:
    answer = post(receiver, data, token=token, raw=raw)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert says in error and "\n" not in error
    assert recorded(project) == []  # the valid first alert of a refused body is not recorded either


def test_a_foreign_host_is_refused(receiver: Receiver) -> None:
    headers = {"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"}
    answer = requests.post(receiver.url, data=b"{}", headers=headers, timeout=10)
    assert answer.status_code == 421


def test_serve_needs_a_token_and_status_needs_prometheus(project: Project) -> None:
    out = run("alerts", *project.cli("serve", "--port", "0"), env={"TRAINOPS_ALERTS_TOKEN": None})
    assert out.code == 2 and out.last_error_line.startswith("Error: the alert receiver needs a shared token")
    status = run("slo", *project.cli("status"))
    assert status.code == 6 and status.last_error_line.startswith(
        f"Error: Prometheus http://{LOOPBACK}:1 is unreachable"
    )
    assert "the SLOs' status cannot be read" in status.last_error_line
