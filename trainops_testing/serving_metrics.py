"""vLLM's /metrics for the serving pods of the simulated cluster, scraped by a real Prometheus.

kwok runs no containers, so the serving pods of a Rollout answer nothing. In their place,
one exporter per serving ReplicaSet of the Rollout (trainops_testing/prometheus.py's
VllmExporter: vLLM's real metric names) runs on loopback, and Prometheus discovers them
through a file_sd targets file that this class rewrites as ReplicaSets come and go. Every
series is labelled as a ServiceMonitor on the stable and canary Services would label it
(`service="<name>-stable"` / `"<name>-canary"`, from the Rollout's status), plus
`rollouts_pod_template_hash` and `source="kwok-stand-in"`, which says that no vLLM served it.

The latency each exporter reports is the test's: `latency_for(release)` picks it by the
`trainops.dev/release` annotation of the ReplicaSet's pod template.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from trainops_testing.prometheus import Prometheus
from trainops_testing.services import (
    LOOPBACK,
    ServiceError,
)
from trainops_testing.vllm import VllmExporter

RELEASE_ANNOTATION = "trainops.dev/release"
HASH_LABEL = "rollouts-pod-template-hash"


class ReplicaSetExporters:
    """Keeps one VllmExporter per live ReplicaSet of a Rollout and Prometheus' targets in step."""

    def __init__(
        self,
        *,
        get: Callable[[str], dict[str, Any]],
        prometheus: Prometheus,  # with file_sd
        rollout: str,
        namespace: str,
        latency_for: Callable[[str], float],
    ) -> None:
        self._get = get  # kubectl get -o json of a resource path, e.g. "rollout/x" or "replicasets"
        self.prometheus = prometheus
        self.rollout = rollout
        self.namespace = namespace
        self.latency_for = latency_for
        self.exporters: dict[str, VllmExporter] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> ReplicaSetExporters:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
                self.error = None  # only a failure that lasts matters (the Rollout may not exist yet)
            except BaseException as err:  # reported by check(): the test fails with it
                self.error = err
            self._stop.wait(0.5)

    def check(self) -> None:
        if self.error is not None:
            raise ServiceError(f"serving exporters: {type(self.error).__name__}: {self.error}")

    def sync(self) -> None:
        rollout = self._get(f"rollout/{self.rollout}")
        status = rollout.get("status") or {}
        stable, canary = status.get("stableRS"), status.get("currentPodHash")
        targets = []
        for rs in self._get("replicasets").get("items", []):
            owners = rs["metadata"].get("ownerReferences") or []
            if not any(o.get("kind") == "Rollout" and o.get("name") == self.rollout for o in owners):
                continue
            pod_hash = rs["metadata"].get("labels", {}).get(HASH_LABEL, "")
            if not (rs.get("spec") or {}).get("replicas"):
                continue
            annotations = rs["spec"]["template"]["metadata"].get("annotations") or {}
            exporter = self.exporters.get(pod_hash)
            if exporter is None:
                exporter = self.exporters[pod_hash] = VllmExporter(labels={"source": "kwok-stand-in"})
            exporter.latency = self.latency_for(annotations.get(RELEASE_ANNOTATION, ""))
            role = "stable" if pod_hash == stable else "canary" if pod_hash == canary else "old"
            labels = {"service": f"{self.rollout}-{role}", "rollouts_pod_template_hash": pod_hash}
            targets.append({"targets": [f"{LOOPBACK}:{exporter.port}"], "labels": labels})
        groups = sorted(targets, key=lambda t: t["targets"][0])
        if json.loads(self.prometheus.targets_file.read_text()) != groups:
            self.prometheus.set_targets(groups)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for exporter in self.exporters.values():
            exporter.close()
        self.exporters.clear()
