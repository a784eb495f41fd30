"""tiny-llm served through Argo CD and Argo Rollouts on the simulated cluster: its manifest
overlay, and reading what the controllers did (kubectl, not trainops) and waiting for it
(tests/argo, bench/gray_release.py, scripts/cluster_job.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.projects import IMAGE, Project, make_project

T = TypeVar("T")
NAMESPACE = "tiny-llm"
NAME = "tiny-llm"
APP = "tiny-llm-serve-default"
TTFT_QUERY = (
    'histogram_quantile(0.95, sum(rate(vllm:time_to_first_token_seconds_bucket{service="tiny-llm-canary"}[10s]))'
    " by (le)) * 1000"
)


def serving_overlay(repo: str, *, prometheus: str | None = None) -> dict[str, Any]:
    """tiny-llm served by Argo Rollouts on 4 replicas, synced by Argo CD from `repo`."""
    rollout: dict[str, Any] = {
        "namespace": NAMESPACE,
        "replicas": 4,
        "canary": {"steps": [{"weight": 25, "pause": "manual"}, {"weight": 50, "pause": "manual"}, {"weight": 100}]},
        "analysis": None,
    }
    if prometheus is not None:
        rollout["analysis"] = {
            "prometheus": prometheus,
            "interval": "2s",
            "count": 3,
            "failureLimit": 0,
            "thresholds": [{"metric": "ttft_p95_ms", "query": TTFT_QUERY, "op": "<", "value": 500}],
        }
    return {
        "spec": {
            "gitops": {"repo": repo, "branch": "main", "path": "clusters/dev", "argocd": {}},
            "rollout": rollout,
            # no SLOs: their AnalysisTemplate metrics would ask the example's in-cluster Prometheus
            "slo": None,
        }
    }


def serving_project(root: Path, repo: str, *, prometheus: str | None = None) -> Project:
    return make_project(root, serving_overlay(repo, prometheus=prometheus))


def start_args(version: str) -> list[str]:
    return ["rollout", "start", f"tiny-llm/model:{version}", "--image", IMAGE]


@dataclass
class Live:
    """The cluster as the controllers left it, read with kubectl (not with trainops)."""

    argo: ArgoStack

    def get(self, what: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.argo.kubectl_run("get", "-n", namespace, what, "-o", "json"))
        return data

    def exists(self, what: str, namespace: str = NAMESPACE) -> bool:
        out = self.argo.kubectl_run("get", "-n", namespace, what, "--ignore-not-found", "-o", "name")
        return bool(out.strip())

    def rollout(self) -> dict[str, Any]:
        return self.get(f"rollout/{NAME}")

    def app(self) -> dict[str, Any]:
        return self.get(f"application/{APP}", namespace="argocd")

    def replica_sets(self) -> dict[str, tuple[int, int]]:
        """pod-template hash → (desired, ready) of the Rollout's ReplicaSets."""
        out = {}
        for rs in self.get("replicasets")["items"]:
            if any(o.get("name") == NAME for o in rs["metadata"].get("ownerReferences") or []):
                h = rs["metadata"]["labels"]["rollouts-pod-template-hash"]
                out[h] = (rs["spec"].get("replicas", 0), rs.get("status", {}).get("readyReplicas", 0))
        return out

    def weights(self) -> dict[str, int]:
        """Service → weight on the HTTPRoute's weighted rule."""
        for rule in self.get(f"httproute/{NAME}")["spec"]["rules"]:
            if not rule.get("matches") or not any(m.get("headers") for m in rule["matches"]):
                return {ref["name"]: ref.get("weight", 1) for ref in rule["backendRefs"]}
        return {}

    def header_routes(self) -> list[str]:
        rules = self.get(f"httproute/{NAME}")["spec"]["rules"]
        return [r.get("name", "") for r in rules if any(m.get("headers") for m in r.get("matches") or [])]

    def bootstrap(self, project: Project) -> None:
        """What a user does once: apply the Application trainops rendered into the GitOps repo."""
        import subprocess

        import yaml

        tree = project.root / "gitops-checkout"
        subprocess.run(["git", "clone", "-q", self.app_repo(project), str(tree)], check=True)
        text = (tree / "clusters/dev-serve/argocd/application.yaml").read_text()
        self.argo.project(yaml.safe_load_all(text).__next__()["spec"]["project"])
        self.argo.apply(text)

    @staticmethod
    def app_repo(project: Project) -> str:
        import yaml

        data = yaml.safe_load(project.manifest.read_text())
        repo: str = data["spec"]["gitops"]["repo"]
        return repo


def wait(probe: Callable[[], T | None], *, timeout: float, what: str, argo: ArgoStack | None = None) -> T:
    """Poll `probe` until it returns something truthy; fail with the controllers' logs."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except Exception as err:  # a probe: not yet
            last = err
            value = None
        if value:
            return value
        time.sleep(0.2)  # pacing between probes of the cluster, not a fixed delay
    logs = f"\n{argo.logs(15)}" if argo is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r}){logs}")


def rollout_at(live: Live, *, canary_weight: int) -> dict[str, Any] | None:
    """The Rollout paused on its `pause: {}` step (the commit's last) with the HTTPRoute at
    `canary_weight`, else None."""
    ro = live.rollout()
    status = ro.get("status") or {}
    steps = ro["spec"]["strategy"]["canary"]["steps"]
    pause = next((i for i, step in enumerate(steps) if "pause" in step), None)
    if pause is None or status.get("currentStepIndex") != pause or not status.get("pauseConditions"):
        return None
    if status.get("currentStepHash") is None or ro["metadata"]["generation"] != int(
        status.get("observedGeneration", 0)
    ):
        return None
    weights = live.weights()
    if weights.get(f"{NAME}-canary") != canary_weight:
        return None
    return ro


def app_synced(live: Live) -> dict[str, Any] | None:
    app = live.app()
    return app if (app.get("status") or {}).get("sync", {}).get("status") == "Synced" else None


def healthy_stable(live: Live) -> str | None:
    """The stable pod-template hash once the Rollout is Healthy."""
    status = live.rollout().get("status") or {}
    return str(status["stableRS"]) if status.get("phase") == "Healthy" and status.get("stableRS") else None


def replicas_are(live: Live, pod_hash: str, want: tuple[int, int]) -> dict[str, tuple[int, int]] | None:
    sets = live.replica_sets()
    return sets if sets.get(pod_hash) == want else None
