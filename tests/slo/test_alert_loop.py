"""The alert loop for real: vLLM stand-ins scraped by Prometheus evaluating trainops' rules, Alertmanager
delivering to `trainops alerts serve`, and `rollout promote --auto` gated by the same SLOs.

A latency regression on the canary fires the page, Alertmanager delivers it, the incident is
recorded against the canary's release, and promote --auto aborts with a commit naming the SLO
and its values; a healthy canary is promoted to stable with no alert. The SLOs' windows are
short (declared through the manifest: a 1h SLO window scales the page's 1h/5m to 5s/4s) so all
of it takes seconds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_json_convention import bad_keys
from tests.gitops.helpers import git, tip
from trainops.faults.query import list_incidents
from trainops.manifest import load_manifest
from trainops.rollout.render import rule_file_of
from trainops.ui.alert_receiver import Receiver
from trainops_testing.cli import run
from trainops_testing.engine_metrics import VllmStandIn
from trainops_testing.projects import IMAGE, Project, make_project, slo_overlay
from trainops_testing.prometheus import Alertmanager, Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for

TOKEN = "s3cret-alert-token"


@dataclass
class Stack:
    project: Project
    stable: VllmStandIn
    canary: VllmStandIn
    prometheus: Prometheus
    alertmanager: Alertmanager
    receiver: Receiver
    started: float  # monotonic: the first scrape can come from here on


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    stable, canary = VllmStandIn(), VllmStandIn()
    port = free_port()
    project = make_project(tmp_path / "p", slo_overlay(f"http://{LOOPBACK}:{port}"))
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v2"):
        outcome = run("rollout", *project.cli("start", release, "--image", IMAGE))
        assert outcome.code == 0, outcome.stderr
    manifest = load_manifest(project.manifest)
    receiver = Receiver(manifest, host=LOOPBACK, port=0, token=TOKEN).start()
    alertmanager = Alertmanager(tmp_path / "am", webhook=receiver.url, token=TOKEN)
    targets = {"tiny-llm-stable": [stable.target], "tiny-llm-canary": [canary.target]}
    prometheus = Prometheus(tmp_path / "prom", targets=targets, rules=rule_file_of(manifest),
                                alertmanager=f"{LOOPBACK}:{0}", port=port)  # fmt: skip
    services = [alertmanager, prometheus]
    try:
        alertmanager.start()
        prometheus.alertmanager = f"{LOOPBACK}:{alertmanager.port}"
        started = time.monotonic()
        prometheus.start()
    except ServiceError as err:
        for service in services:
            service.stop()
        receiver.close()
        pytest.fail(str(err), pytrace=False)
    yield Stack(project, stable, canary, prometheus, alertmanager, receiver, started)
    for service in reversed(services):
        service.stop()
    receiver.close()
    stable.close()
    canary.close()


def _incidents(stack: Stack) -> list[Any]:
    return list_incidents(load_manifest(stack.project.manifest)).incidents


def _message(project: Project) -> str:
    return git("--git-dir", str(project.gitops), "log", "-1", "--format=%B", "main")


def _state(project: Project) -> dict[str, Any]:
    text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/trainops-rollout.json")
    data: dict[str, Any] = json.loads(text)
    return data


def burn(series: dict[str, Any], window: str) -> float:
    rate: float = next(b["burnRate"] for b in series["burnRates"] if b["window"] == window)
    return rate


def _browser_page(stack: Stack, path: str) -> str:
    """A page of the registry browser started with the project's manifest (in-process)."""
    from starlette.testclient import TestClient

    from trainops.registry.context import open_registries
    from trainops.ui.app import create_app
    from trainops.ui.index import Index
    from trainops.ui.views import Browser

    opened = open_registries(file=str(stack.project.manifest), env=None, insecure=False)
    with opened.registries as registries:
        url = registries.default_registry
        assert url is not None
        index = Index(stack.project.root / "ui.sqlite")
        browser = Browser(index=index, registries=registries, urls=[url], manifest=opened.manifest)
        response = TestClient(create_app(browser), base_url="http://127.0.0.1").get(path)
        assert response.status_code == 200, response.text
        return response.text


def test_canary_latency_regression_pages_is_recorded_and_aborted(stack: Stack) -> None:
    stack.canary.ttft = 2.5  # every canary request over the 1 s TTFT threshold: burn 100 of a 99% SLO
    wait_for(lambda: any(i.slo == "tiny-llm-ttft" and i.action == "page" for i in _incidents(stack)),
             timeout=60, what="the page recorded as an incident")  # fmt: skip
    paged = time.monotonic() - stack.started
    incident = next(i for i in _incidents(stack) if i.slo == "tiny-llm-ttft" and i.action == "page")
    assert incident.subject == "release" and incident.run_id == "v2"  # the canary's release
    assert incident.fault == "slo-burn" and incident.source == "alertmanager"
    assert incident.burn_rate is not None and incident.burn_rate > 14.4
    assert incident.query == 'slo:sli_error:ratio_rate5s{slo="tiny-llm-ttft"} / 0.01'
    assert incident.recovered is None
    # the stable, within target, raised nothing
    assert all(i.run_id == "v2" for i in _incidents(stack))
    assert paged < 30  # the page's windows are 5 s and 4 s: a few evaluations after the first scrapes

    stable = 'slo:sli_error:ratio_rate1h{slo="tiny-llm-ttft",service="tiny-llm-stable"}'
    wait_for(lambda: bool(stack.prometheus.query(stable)), timeout=30, what="the stable's SLI recorded")
    status = run("slo", *stack.project.cli("status", "-o", "json"))
    assert status.code == 0, status.stderr
    report = json.loads(status.stdout)
    assert list(bad_keys(report)) == []  # the one JSON convention
    ttft = next(s for s in report["slos"] if s["slo"] == "tiny-llm-ttft")
    by_service = {s["labels"]["service"]: s for s in ttft["series"]}
    assert sorted(by_service) == ["tiny-llm-canary", "tiny-llm-stable"], ttft
    assert by_service["tiny-llm-canary"]["sliNow"] == 0 and burn(by_service["tiny-llm-canary"], "5s") > 14.4
    assert by_service["tiny-llm-stable"]["sliNow"] == 1 and by_service["tiny-llm-stable"]["budgetLeft"] == 1
    page = _browser_page(stack, "/slo")
    row = re.search(r'<tr data-slo="tiny-llm-ttft" data-of="tiny-llm-canary">(.*?)</tr>', page)
    assert row is not None and '<td class="sli">0.000%</td>' in row.group(1), page

    outcome = run("rollout", *stack.project.cli("promote", "--auto"))
    assert outcome.code == 8, outcome.stderr
    assert "aborted in commit" in outcome.last_error_line and "slo tiny-llm-ttft" in outcome.last_error_line
    body = _message(stack.project)
    assert "Trainops-Action: abort" in body
    line = next(x for x in body.splitlines() if "slo tiny-llm-ttft" in x and "canary SLI" in x)
    assert "canary SLI 0.000%" in line and "objective 99%" in line and "FAILED" in line
    state = _state(stack.project)
    assert state["canary"] is None and "model:v1@" in state["stable"]["release"]

    # the canary's latency comes back: Alertmanager says resolved, and the same incident records it
    stack.canary.ttft = 0.2
    wait_for(lambda: any(i.id == incident.id and i.recovered for i in _incidents(stack)), timeout=60,
             what="the resolved page recorded")  # fmt: skip
    resolved = next(i for i in _incidents(stack) if i.id == incident.id)
    assert resolved.run_id == "v2" and resolved.action_note.startswith("Alertmanager: resolved")


def test_healthy_canary_is_promoted_with_no_alert(stack: Stack) -> None:
    wait_for(lambda: bool(stack.prometheus.query('slo:sli_error:ratio_rate5s{service="tiny-llm-canary"}')),
             timeout=60, what="the canary's SLIs recorded")  # fmt: skip
    before = tip(stack.project.gitops)
    outcome = run("rollout", *stack.project.cli("promote", "--auto", "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    result = json.loads(outcome.stdout)
    assert result["canary"] is None and result["stable"]["version"] == "v2"
    log = git("--git-dir", str(stack.project.gitops), "log", "--format=%B%x00", f"{before}..main").split("\0")
    bodies = [b.strip() for b in log if b.strip()]
    assert len(bodies) == 3  # 10% → 50% → 100% → stable, each judged by the three SLOs
    for body in bodies:
        assert body.count("canary SLI") == 3 and "FAILED" not in body
    # the first step re-checks the release's eval gate: a model pushed outside `release create` has none
    assert "eval gate: release v2 records no eval (nothing to re-check)" in bodies[-1]
    assert stack.alertmanager.alerts() == [] and _incidents(stack) == []
