"""vLLM's /metrics for the serving pods of the simulated cluster, scraped by a real Prometheus.

kwok runs no containers, so the serving pods of a Rollout answer nothing. In their place,
one exporter per serving ReplicaSet of the Rollout (trainops_testing/engine_metrics.py's
VllmExporter: vLLM's real metric names) runs on loopback, and Prometheus discovers them
through a file_sd targets file that this class rewrites as ReplicaSets come and go. Every
series is labelled as a ServiceMonitor on the stable and canary Services would label it
(`service="<name>-stable"` / `"<name>-canary"`, from the Rollout's status), plus
`rollouts_pod_template_hash` and `source="kwok-stand-in"`, which says that no vLLM served it.

The latency each exporter reports is the test's: `latency_for(release)` picks it by the
`trainops.dev/release` annotation of the ReplicaSet's pod template.

`monitor_targets` follows a rendered ServiceMonitor to the Services it selects and their pod
templates, and says which labels each pod's series would carry, so that stand-ins are labelled
from what trainops renders rather than from what a test assumes.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from trainops_testing.engine_metrics import VllmExporter
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import (
    LOOPBACK,
    ServiceError,
)

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


# -- what a rendered ServiceMonitor would scrape -------------------------------------------------

_POD_LABEL = "__meta_kubernetes_pod_label_"


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector (matchLabels, matchExpressions) selects `labels`."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]  # fmt: skip
        if not ok:
            return False
    return True


def _relabel(rules: list[dict[str, Any]], pod: dict[str, str], out: dict[str, str]) -> None:
    """The endpoint's relabelings that copy pod labels (action replace, default regex), applied to
    `out`; anything else is refused, so a monitor this does not understand fails the test."""
    meta = {_POD_LABEL + re.sub(r"[^a-zA-Z0-9_]", "_", k): v for k, v in pod.items()}
    for rule in rules:
        unknown = set(rule) - {"sourceLabels", "targetLabel", "action"}
        if unknown or rule.get("action", "replace") != "replace" or not rule.get("targetLabel"):
            raise ServiceError(f"relabeling {rule} is not one the stand-ins can follow")
        value = ";".join(meta.get(s, "") for s in rule.get("sourceLabels") or [])
        if value:
            out[rule["targetLabel"]] = value
        else:
            out.pop(rule["targetLabel"], None)


def monitor_targets(objects: list[dict[str, Any]], monitor: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Every pod template the ServiceMonitor `monitor` of a rendered tree reaches through the
    Services it selects, with the labels its series would carry: (the pod's labels, the target's
    labels — `service` as the operator sets it, then the endpoint's relabelings)."""
    from trainops.rollout.disagg import pod_templates

    found = [o for o in objects if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == monitor]
    if len(found) != 1:
        raise ServiceError(f"the tree has {len(found)} ServiceMonitors named {monitor}")
    spec = found[0]["spec"]
    pods = [t["metadata"].get("labels", {}) for o in objects for t in pod_templates(o)]
    out = []
    for svc in (o for o in objects if o["kind"] == "Service"):
        if not selects(spec["selector"], svc["metadata"].get("labels", {})):
            continue
        chosen = svc["spec"].get("selector") or {}
        ports = {p["name"] for p in svc["spec"].get("ports", [])}
        for pod in (p for p in pods if chosen and selects({"matchLabels": chosen}, p)):  # no selector: no pods
            for endpoint in (e for e in spec["endpoints"] if e["port"] in ports):
                labels = {"service": svc["metadata"]["name"]}
                _relabel(endpoint.get("relabelings") or [], pod, labels)
                out.append((pod, labels))
    return out
