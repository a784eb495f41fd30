"""promote --auto against a real Prometheus scraping a loopback vLLM exporter; PromQL checked by promtool."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gitops.helpers import git, tip
from trainops_testing.cli import run
from trainops_testing.engine_metrics import VllmExporter
from trainops_testing.projects import EXAMPLE, IMAGE, Project, make_project
from trainops_testing.prometheus import Prometheus, has_data
from trainops_testing.services import ServiceError, free_port, require, wait_for

P95 = "histogram_quantile(0.95, sum(rate(vllm:e2e_request_latency_seconds_bucket[5s])) by (le)) * 1000"
RUNNING = "sum(vllm:num_requests_running)"


def analysis(url: str, query: str = P95) -> dict[str, Any]:
    return {
        "prometheus": url,
        "interval": "1s",
        "count": 2,
        "failureLimit": 0,
        "thresholds": [
            {"metric": "e2e_p95_ms", "query": query, "op": "<", "value": 500},
            {"metric": "requests_running", "query": RUNNING, "op": "<", "value": 100},
        ],
    }


@pytest.fixture
def metrics(tmp_path: Path) -> Iterator[tuple[VllmExporter, Prometheus]]:
    exporter = VllmExporter()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{exporter.port}")
    try:
        prometheus.start()
    except ServiceError as err:
        prometheus.stop()
        exporter.close()
        pytest.fail(str(err), pytrace=False)
    yield exporter, prometheus
    prometheus.stop()
    exporter.close()


def canary(tmp_path: Path, url: str, query: str = P95) -> Project:
    # rollout.analysis alone (the SLO gate has its own tests: tests/slo/test_alert_loop.py)
    project = make_project(tmp_path / "p", {"spec": {"rollout": {"analysis": analysis(url, query)}, "slo": None}})
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v2"):
        outcome = run("rollout", *project.cli("start", release, "--image", IMAGE))
        assert outcome.code == 0, outcome.stderr
    return project


def message(project: Project, commit: str = "main") -> str:
    return git("--git-dir", str(project.gitops), "log", "-1", "--format=%B", commit)


def served(project: Project) -> dict[str, Any]:
    text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/trainops-rollout.json")
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def test_healthy_canary_is_promoted_step_by_step(
    tmp_path: Path, metrics: tuple[VllmExporter, Prometheus], caplog: pytest.LogCaptureFixture
) -> None:
    exporter, prometheus = metrics
    exporter.latency = 0.2
    project = canary(tmp_path, prometheus.url)
    wait_for(lambda: has_data(prometheus.url, P95), timeout=60, what="latency data in Prometheus")
    before = tip(project.gitops)
    outcome = run("rollout", *project.cli("promote", "--auto", "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    # no kubeconfig anywhere: trainops measures itself, and says once that it read no cluster
    assert outcome.stderr.count("could not check the cluster") == 1, outcome.stderr
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sum("e2e_p95_ms=" in w for w in warned) == 6  # each measurement reported as it is taken
    result = json.loads(outcome.stdout)
    assert result["canary"] is None and result["stable"]["version"] == "v2"
    log = git("--git-dir", str(project.gitops), "log", "--format=%B%x00", f"{before}..main").split("\0")
    bodies = [b.strip() for b in log if b.strip()]
    assert len(bodies) == 3  # 10% → 50% → 100% → stable, one commit each
    for body in bodies:
        assert "Trainops-Action: promote-auto" in body
        value = float(body.split("e2e_p95_ms=")[1].split(" ")[0])
        assert 100 < value < 250  # 0.2 s, inside the (0.1, 0.25] bucket
    assert "model:v2@" in served(project)["stable"]["release"]


def test_slow_canary_is_aborted_with_the_measured_value(
    tmp_path: Path, metrics: tuple[VllmExporter, Prometheus]
) -> None:
    exporter, prometheus = metrics
    exporter.latency = 3.0
    project = canary(tmp_path, prometheus.url)
    wait_for(lambda: has_data(prometheus.url, P95), timeout=60, what="latency data in Prometheus")
    outcome = run("rollout", *project.cli("promote", "--auto"))
    assert outcome.code == 8, outcome.stderr
    assert "failed analysis" in outcome.last_error_line and "aborted in commit" in outcome.last_error_line
    body = message(project)
    assert "Trainops-Action: abort" in body
    value = float(body.split("e2e_p95_ms=")[1].split(" ")[0])
    assert value > 2500  # 3 s, inside the (2.5, 5] bucket: over the 500 ms threshold
    assert "FAILED" in body
    state = served(project)
    assert state["canary"] is None and "model:v1@" in state["stable"]["release"]


def test_prometheus_down_refuses_to_promote(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    project = canary(tmp_path, f"http://127.0.0.1:{free_port()}")
    before = tip(project.gitops)
    outcome = run("rollout", *project.cli("promote", "--auto"))
    assert outcome.code == 6, outcome.stderr
    assert "unreachable" in outcome.last_error_line and "nothing was promoted" in outcome.last_error_line
    retries = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [" retry 1 of 2 in " in m for m in retries] == [True, False] and " retry 2 of 2 " in retries[1]
    assert tip(project.gitops) == before


def test_no_data_refuses_to_promote(tmp_path: Path, metrics: tuple[VllmExporter, Prometheus]) -> None:
    _, prometheus = metrics
    project = canary(tmp_path, prometheus.url, query="sum(vllm:no_such_metric)")
    wait_for(lambda: has_data(prometheus.url, RUNNING), timeout=60, what="exporter data in Prometheus")
    before = tip(project.gitops)
    outcome = run("rollout", *project.cli("promote", "--auto"))
    assert outcome.code == 8, outcome.stderr
    assert "no data" in outcome.last_error_line
    assert tip(project.gitops) == before


def test_every_example_threshold_is_valid_promql(tmp_path: Path) -> None:
    promtool = require("promtool", "apt-get install -y prometheus")
    example = yaml.safe_load(EXAMPLE.read_text())
    thresholds = example["spec"]["rollout"]["analysis"]["thresholds"] + analysis("http://x")["thresholds"]
    rules = [{"record": f"trainops:{t['metric']}", "expr": t["query"]} for t in thresholds]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "thresholds", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(rules)} rules found" in proc.stdout + proc.stderr
    broken = tmp_path / "broken.yml"
    bad_rule = {"record": "x:y", "expr": "sum(rate(x[5m]"}
    broken.write_text(yaml.safe_dump({"groups": [{"name": "b", "rules": [bad_rule]}]}))
    assert subprocess.run([promtool, "check", "rules", str(broken)], capture_output=True, check=False).returncode != 0


def test_a_disaggregated_canary_is_judged_by_the_same_analysis(
    tmp_path: Path, metrics: tuple[VllmExporter, Prometheus]
) -> None:
    """The canary pool of a prefill+decode pair slower than the threshold: promote --auto aborts it
    in one commit, and the route sends everything to the stable pool again."""
    from tests.rollout.test_disagg import disagg

    exporter, prometheus = metrics
    exporter.latency = 3.0
    rollout = {**disagg(), "analysis": analysis(prometheus.url)}
    project = make_project(tmp_path / "p", {"spec": {"rollout": rollout, "slo": None}})
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v2"):
        outcome = run("rollout", *project.cli("start", release, "--image", IMAGE))
        assert outcome.code == 0, outcome.stderr
    wait_for(lambda: has_data(prometheus.url, P95), timeout=60, what="latency data in Prometheus")
    outcome = run("rollout", *project.cli("promote", "--auto"))
    assert outcome.code == 8, outcome.stderr
    assert "failed analysis" in outcome.last_error_line
    assert "Trainops-Action: abort" in message(project)
    text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/httproute.yaml")
    (route,) = [d for d in yaml.safe_load_all(text) if d]
    assert route["spec"]["rules"][-1]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "tiny-llm-stable", "weight": 100}
    ]
