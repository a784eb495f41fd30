"""Incidents in the registry browser: listed per run and per node, the node with three
incidents within a day flagged for draining, every value escaped (a served uvicorn app over
a file:// registry holding incidents written by trainops.faults, as the supervisor writes them)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from trainops import clock
from trainops.faults import incidents as records
from trainops.faults.incidents import Incident
from trainops.registry.context import Registries
from trainops.ui.app import create_app
from trainops.ui.index import Index, refresh
from trainops.ui.views import Browser
from trainops_testing.services import free_port
from ui.conftest import ServerThread

HOSTILE = "n<script>x</script>"


def _incident(run: str, n: int, fault: str, node: str, hours_ago: float, *, recovered: bool = False) -> Incident:
    moment = clock.now() - timedelta(hours=hours_ago)
    at = clock.iso(moment)
    # recovered: acted 1 s after the decision, started again 2 s later, restored 3 s later, stepping 3 s later
    later = [clock.iso(moment + timedelta(seconds=s)) for s in (1, 3, 6, 9)] if recovered else [None] * 4
    return Incident(
        id=f"{run}.{n}",
        pipeline="tiny",
        run_id=run,
        fault=fault,
        detail="d",
        source="trainer",
        evidence=["line"],
        node=node,
        action="restart",
        action_note="restart",
        evidence_at=at,
        detected=at,
        acted=later[0],
        restarted=later[1],
        restore_ended=later[2],
        recovered=later[3],
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("ui-incidents")
    url = f"file://{tmp / 'registry'}"
    registries = Registries(default_registry=url)
    repo = records.incidents_repository(registries, registry=url, pipeline="tiny")
    written = [
        _incident("run-a", 1, "nccl-timeout", "gpu-1", 5),
        _incident("run-a", 2, "fell-off-bus", "gpu-1", 4),
        _incident("run-b", 1, "hang", "gpu-1", 3, recovered=True),
        _incident("run-b", 2, "cuda-oom", HOSTILE, 2.5),
        _incident("run-b", 3, "nvlink", "gpu-2", 72),
    ]
    for item in written:
        records.save(registries, repository=repo, incident=item)
    index = Index(tmp / "index.sqlite")
    assert not refresh(index, registries, urls=[url]).errors
    server = ServerThread(create_app(Browser(index=index, registries=registries, urls=[url])), free_port())
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
        registries.close()


def test_incidents_per_run_and_per_node_with_the_drain_flag(base: str) -> None:
    data = requests.get(f"{base}/api/incidents", timeout=30).json()
    assert [i["id"] for i in data["incidents"]] == ["run-b.3", "run-a.1", "run-a.2", "run-b.1", "run-b.2"]
    nodes = {n["node"]: n for n in data["nodes"]}
    assert (nodes["gpu-1"]["incidents"], nodes["gpu-1"]["flagged"]) == (3, True)
    assert (nodes["gpu-2"]["incidents"], nodes["gpu-2"]["flagged"]) == (1, False)
    run_a = requests.get(f"{base}/api/incidents", params={"run": "run-a"}, timeout=30).json()
    assert [i["id"] for i in run_a["incidents"]] == ["run-a.1", "run-a.2"]
    page = requests.get(f"{base}/incidents", params={"node": "gpu-1"}, timeout=30)
    assert page.status_code == 200
    assert "on node gpu-1" in page.text and page.text.count('<tr class="flagged">') == 1
    assert "run-a.2" in page.text and "run-b.3" not in page.text.split('id="nodes"')[0]


def test_values_are_escaped(base: str) -> None:
    page = requests.get(f"{base}/incidents", timeout=30).text
    assert "<script>x</script>" not in page and "n&lt;script&gt;x&lt;/script&gt;" in page


def test_a_runs_post_incident_report_page(base: str) -> None:
    page = requests.get(f"{base}/incidents/report", params={"run": "run-b"}, timeout=30)
    assert page.status_code == 200, page.text[-2000:]
    text = page.text
    assert "Post-incident report of run run-b" in text and "run-b.3 · nvlink on gpu-2 → restart" in text
    assert text.count("<td>signal</td>") == 3 and text.count("<td>recovery</td>") == 3
    assert "resolves: reset-gpu" in text  # nvlink: NVIDIA's bucket folded
    # the one recovered incident's MTTR split into its phases; the others have none
    split = "detect 0.0 s · decide 1.0 s · reschedule 2.0 s · restore 3.0 s · first step 3.0 s"
    assert text.count('class="phases"') == 1 and f"MTTR 9.0 s:\n{split}</p>" in text, text
    assert HOSTILE not in text and "n&lt;script&gt;x&lt;/script&gt;" in text
    listed = requests.get(f"{base}/incidents", params={"run": "run-b"}, timeout=30).text
    assert "/incidents/report?run=run-b" in listed
    missing = requests.get(f"{base}/incidents/report", params={"run": "no-such-run"}, timeout=30)
    assert missing.status_code == 404
