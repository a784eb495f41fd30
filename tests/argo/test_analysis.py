"""Canary analysis carried out by Argo Rollouts against a real Prometheus.

The AnalysisTemplate trainops renders from rollout.analysis.thresholds (and from the SLOs of
spec.slo.serving: one metric per SLO, the canary's burn rate where it burns faster than the
stable) runs as an AnalysisRun; Prometheus scrapes one exporter per serving ReplicaSet with vLLM's metric names
(trainops_testing/serving_metrics.py: kwok pods serve nothing, so the series are labelled
`source="kwok-stand-in"`). The canary's time to first token is over the threshold: the
AnalysisRun fails, the controller aborts, and trainops reports it and refuses to promote.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import (
    NAME,
    NAMESPACE,
    Live,
    app_synced,
    healthy_stable,
    serving_overlay,
    serving_project,
    start_args,
    wait,
)
from trainops_testing.cli import run
from trainops_testing.projects import make_project
from trainops_testing.prometheus import Prometheus
from trainops_testing.serving_metrics import ReplicaSetExporters

SYNC = 90.0
SLOW, FAST = 2.0, 0.05  # seconds to the first token: the canary's, the stable's


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    prom = Prometheus(tmp_path / "prometheus", file_sd=True)
    prom.start()
    yield prom
    prom.stop()


def _serve_v1(project: Any, live: Live, argo: ArgoStack) -> str:
    """v1 started, Argo CD bootstrapped and synced, v1 Healthy as the stable: its pod-template hash."""
    assert run(*project.cli(*start_args("v1"))).code == 0
    live.bootstrap(project)
    wait(lambda: app_synced(live), timeout=SYNC, what="Argo CD to sync the serving path", argo=argo)
    return wait(lambda: healthy_stable(live), timeout=SYNC, what="v1 Healthy and stable", argo=argo)


def _status(project: Any, argo: ArgoStack) -> dict[str, Any]:
    outcome = run(*project.cli("rollout", "status", "--kubeconfig", str(argo.kubeconfig), "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    data: dict[str, Any] = json.loads(outcome.stdout)
    return data


def test_slow_canary_fails_the_analysis_and_the_controller_aborts(
    argo: ArgoStack, gitops_http: str, prometheus: Prometheus, tmp_path: Path
) -> None:
    project = serving_project(tmp_path / "project", gitops_http, prometheus=prometheus.url)
    live = Live(argo)
    exporters = ReplicaSetExporters(
        get=live.get,
        prometheus=prometheus,
        rollout=NAME,
        namespace=NAMESPACE,
        latency_for=lambda release: SLOW if "model:v2@" in release else FAST,
    ).start()
    try:
        v1 = _serve_v1(project, live, argo)

        assert run(*project.cli(*start_args("v2"))).code == 0
        ro = wait(lambda: _aborted(live), timeout=SYNC, what="the controller to abort the canary", argo=argo)
        exporters.check()
        assert ro["status"]["stableRS"] == v1
        run_ = _last_analysis_run(live)
        assert run_["status"]["phase"] == "Failed"
        measured = float(run_["status"]["metricResults"][0]["measurements"][-1]["value"].strip("[]"))
        assert measured > 500  # the stand-in's 2 s to first token, as Prometheus computed its p95
        # the controller's abort alone (nothing committed yet) takes the A/B route off too
        wait(lambda: live.weights().get(f"{NAME}-canary") == 0 and live.header_routes() == [], timeout=SYNC,
             what="all traffic back on stable, the header route gone", argo=argo)  # fmt: skip

        # trainops reads the abort and the value measured, beside the repo's state
        status = _status(project, argo)
        rollout = status["live"]["rollout"]
        assert rollout["aborted"] is True and rollout["analysis"]["phase"] == "Failed"
        value = rollout["analysis"]["measurements"][0]["value"]
        assert float(value.strip("[]")) == pytest.approx(measured)
        assert status["canary"] is not None  # git still names the canary: the abort is not committed

        # promote would clear the abort (a new step hash): refused, naming the measurement —
        # with --kubeconfig, and without it from $KUBECONFIG or ~/.kube/config (the manifest
        # declares Argo CD and Argo Rollouts, so plain promote reads the cluster first)
        home = tmp_path / "home"
        (home / ".kube").mkdir(parents=True)
        shutil.copy(argo.kubeconfig, home / ".kube" / "config")
        for how, args, env in (
            ("--kubeconfig", ("--kubeconfig", str(argo.kubeconfig)), {}),
            ("$KUBECONFIG", (), {"KUBECONFIG": str(argo.kubeconfig)}),
            ("~/.kube/config", (), {"KUBECONFIG": None, "HOME": str(home)}),
        ):
            refused = run(*project.cli("rollout", "promote", *args), env=env)
            assert refused.code == 8, (how, refused.stderr)
            assert "aborted" in refused.stderr and f"ttft-p95-ms={value} (Failed)" in refused.stderr, how
        assert _status(project, argo)["canary"] is not None  # nothing was committed

        # the abort committed: git agrees with the controller; the header route is gone
        assert run(*project.cli("rollout", "abort")).code == 0
        wait(lambda: healthy_stable(live) == v1 and live.header_routes() == [], timeout=SYNC,
             what="v1 Healthy with no header route", argo=argo)  # fmt: skip
        assert live.weights() == {f"{NAME}-stable": 100, f"{NAME}-canary": 0}
    finally:
        exporters.stop()


def _aborted(live: Live) -> dict[str, Any] | None:
    ro = live.rollout()
    return ro if (ro.get("status") or {}).get("abort") else None


def _last_analysis_run(live: Live) -> dict[str, Any]:
    runs = live.get("analysisruns")["items"]
    assert runs, "no AnalysisRun was created"
    latest: dict[str, Any] = max(runs, key=lambda r: r["metadata"]["creationTimestamp"])
    return latest


def test_auto_promote_reads_the_users_kubeconfig_and_follows_the_controllers_verdicts(
    argo: ArgoStack, gitops_http: str, prometheus: Prometheus, tmp_path: Path
) -> None:
    """Plain `promote --auto` with $KUBECONFIG set (no flag): the manifest declares Argo CD and
    Argo Rollouts, so it waits for each committed step's AnalysisRun instead of measuring
    Prometheus itself, and commits the next step on the controller's Successful verdict."""
    project = serving_project(tmp_path / "project", gitops_http, prometheus=prometheus.url)
    live = Live(argo)
    exporters = ReplicaSetExporters(get=live.get, prometheus=prometheus, rollout=NAME, namespace=NAMESPACE,
                                    latency_for=lambda release: FAST).start()  # fmt: skip
    try:
        _serve_v1(project, live, argo)
        assert run(*project.cli(*start_args("v2"))).code == 0
        done = run(*project.cli("rollout", "promote", "--auto", "-o", "json"), env={"KUBECONFIG": str(argo.kubeconfig)})
        assert done.code == 0, done.stderr
        exporters.check()
        result = json.loads(done.stdout)
        assert result["canary"] is None and result["stable"]["version"] == "v2"
        verdicts = [line for line in result["analysis"] if line.startswith("analysis: AnalysisRun")]
        assert len(verdicts) == 3 and all(" Successful" in line for line in verdicts), result["analysis"]
        runs = [r for r in live.get("analysisruns")["items"] if r["status"]["phase"] == "Successful"]
        assert {r["metadata"]["name"] for r in runs} >= {line.split()[2] for line in verdicts}  # the runs it read
        assert "could not check the cluster" not in done.stderr
        wait(lambda: healthy_stable(live), timeout=SYNC, what="v2 Healthy and stable", argo=argo)
    finally:
        exporters.stop()


def _v2_slow(release: str) -> float:
    return SLOW if "model:v2@" in release else FAST


SLO_METRICS = ["slo-tiny-llm-availability", "slo-tiny-llm-ttft"]  # the example's availability, and TTFT


def _slo_project(root: Path, repo: str, prometheus: str) -> Any:
    """No thresholds: the SLOs alone judge the canary, the analysis asking the harness Prometheus."""
    data = serving_overlay(repo)
    data["spec"]["slo"] = {
        "prometheus": prometheus,
        "scrapeInterval": "1s",
        "evaluationInterval": "1s",
        "canaryWindow": "10s",
        "serving": [{"model": "tiny-llm", "latency": [{"metric": "ttft", "objective": 99, "threshold": "1s"}]}],
        "training": None,
    }
    return make_project(root, data)


@pytest.mark.parametrize("regressed", [True, False], ids=["regressed", "healthy"])
def test_the_slo_analysis_aborts_a_canary_burning_its_budget_and_passes_a_healthy_one(
    argo: ArgoStack, gitops_http: str, prometheus: Prometheus, tmp_path: Path, regressed: bool
) -> None:
    project = _slo_project(tmp_path / "project", gitops_http, prometheus.url)
    live = Live(argo)
    exporters = ReplicaSetExporters(get=live.get, prometheus=prometheus, rollout=NAME, namespace=NAMESPACE,
                                    latency_for=_v2_slow if regressed else lambda release: FAST).start()  # fmt: skip
    try:
        v1 = _serve_v1(project, live, argo)
        template = live.get(f"analysistemplate/{NAME}-analysis")["spec"]["metrics"]
        assert [m["name"] for m in template] == SLO_METRICS  # the SLOs' metrics alone

        assert run(*project.cli(*start_args("v2"))).code == 0
        done = wait(lambda: _finished_run(live), timeout=SYNC, what="the SLO AnalysisRun to finish", argo=argo)
        exporters.check()
        results = {r["name"]: r for r in done["status"]["metricResults"]}
        assert sorted(results) == SLO_METRICS
        assert results["slo-tiny-llm-availability"]["phase"] == "Successful", results  # no request failed
        burn = float(results["slo-tiny-llm-ttft"]["measurements"][-1]["value"].strip("[]"))
        if not regressed:
            assert done["status"]["phase"] == "Successful" and burn == 0, results
            assert not (live.rollout().get("status") or {}).get("abort")
            return
        assert done["status"]["phase"] == "Failed" and results["slo-tiny-llm-ttft"]["phase"] == "Failed", results
        assert burn > 1  # every canary request over the 1 s threshold: 100× the 1% budget
        ro = wait(lambda: _aborted(live), timeout=SYNC, what="the controller to abort the canary", argo=argo)
        assert ro["status"]["stableRS"] == v1
    finally:
        exporters.stop()


def _finished_run(live: Live) -> dict[str, Any] | None:
    runs = live.get("analysisruns")["items"]
    done = [r for r in runs if (r.get("status") or {}).get("phase") in ("Successful", "Failed", "Error")]
    return max(done, key=lambda r: r["metadata"]["creationTimestamp"]) if done else None
