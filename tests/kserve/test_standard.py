"""The InferenceService trainops renders, reconciled by KServe v0.20.0's controller in Standard
(RawDeployment) mode: it becomes a Deployment whose kwok pods are Ready (read from the API
server), and — the reason trainops refuses canary steps in this mode — a canaryTrafficPercent
is accepted and ignored: the Deployment rolls over to the new release whole, with no pods
left on the old one and no second Deployment to carry the other 90%.

The objects are applied with the API server's server-side apply, standing in for Argo CD
(tests/argo drives it): what is under test is KServe's reaction, not the sync.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.rollout.helpers import CANARY, NO_AB, STABLE, V1, V2, rollout, tree
from trainops.rollout.state import RolloutState
from trainops.rollout.traffic import DEPLOYMENT_MODE
from trainops_testing.services import wait_for

ISVC = ("serving.kserve.io/v1beta1", "InferenceService")
STANDARD = rollout({"traffic": "kserve", "kserveDeploymentMode": "Standard", "canary": None, "analysis": None, **NO_AB})
# what trainops rendered before it wrote the mode: a 10% canary, no annotation (the cluster's default decides)
KNATIVE_CANARY = rollout({"traffic": "kserve", **NO_AB})


def inference_service(directory: Path, overlay: dict[str, Any], state: Any, namespace: str) -> dict[str, Any]:
    rendered = tree(directory, overlay, state)
    (isvc,) = [obj for obj in rendered.objects if obj["kind"] == "InferenceService"]
    isvc["metadata"]["namespace"] = namespace
    return isvc


def predictor_pods(cluster: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    selector = f"app=isvc.{name}-predictor"
    return cluster.api.list("v1", "Pod", namespace, selector=selector)


def ready(pod: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
    return pod["metadata"].get("deletionTimestamp") is None and conditions.get("Ready") == "True"


def releases(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"].get("annotations", {}).get("trainops.dev/release", "") for p in pods)


def wait_serving(cluster: Any, namespace: str, name: str, release: str, replicas: int) -> list[dict[str, Any]]:
    """Until exactly `replicas` pods exist, all Ready and all serving `release`; returns them."""

    def done() -> bool:
        pods = predictor_pods(cluster, namespace, name)
        return len(pods) == replicas and all(ready(p) for p in pods) and releases(pods) == [release] * replicas

    wait_for(
        done,
        timeout=120,
        what=f"{replicas} Ready predictor pods of {name} on {release}",
        log_path=cluster.logs / "kserve-manager.log",
        interval=0.5,
    )
    return predictor_pods(cluster, namespace, name)


def namespace(cluster: Any, name: str) -> str:
    cluster.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def test_standard_inference_service_becomes_a_ready_deployment(kserve: Any, tmp_path: Path) -> None:
    ns = namespace(kserve, "kserve-standard")
    isvc = inference_service(tmp_path, STANDARD, STABLE, ns)
    assert isvc["metadata"]["annotations"][DEPLOYMENT_MODE] == "Standard"
    kserve.api.apply(isvc)
    name = isvc["metadata"]["name"]
    pods = wait_serving(kserve, ns, name, V1.release, 2)
    assert {p["spec"]["nodeName"] for p in pods} <= set(kserve.nodes)
    deployment = kserve.api.get("apps/v1", "Deployment", f"{name}-predictor", ns)
    assert deployment["status"]["readyReplicas"] == 2
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("InferenceService", name)
    assert kserve.api.get(*ISVC, name, ns)["status"]["deploymentMode"] == "Standard"

    def predictor_ready() -> bool:
        status = kserve.api.get(*ISVC, name, ns).get("status", {})
        return {c["type"]: c["status"] for c in status.get("conditions", [])}.get("PredictorReady") == "True"

    wait_for(predictor_ready, timeout=60, what=f"{name}'s PredictorReady", interval=0.5)


def test_standard_mode_ignores_canary_traffic_percent(kserve: Any, tmp_path: Path) -> None:
    ns = namespace(kserve, "kserve-canary")
    stable = inference_service(tmp_path / "stable", KNATIVE_CANARY, STABLE, ns)
    canary = inference_service(tmp_path / "canary", KNATIVE_CANARY, CANARY, ns)
    for isvc in (stable, canary):
        del isvc["metadata"]["annotations"]  # as before: the cluster's default (Standard here) decides
    name = stable["metadata"]["name"]
    kserve.api.apply(stable)
    wait_serving(kserve, ns, name, V1.release, 2)
    assert canary["spec"]["predictor"]["canaryTrafficPercent"] == 10
    kserve.api.apply(canary)
    applied = kserve.api.get(*ISVC, name, ns)
    assert applied["spec"]["predictor"]["canaryTrafficPercent"] == 10  # accepted as written
    # the whole Deployment moves to v2: nothing is left serving v1 (a 10% canary would keep 90% there)
    wait_serving(kserve, ns, name, V2.release, 2)
    deployments = kserve.api.list("apps/v1", "Deployment", ns)
    assert [d["metadata"]["name"] for d in deployments] == [f"{name}-predictor"]
    assert kserve.api.get(*ISVC, name, ns)["status"]["deploymentMode"] == "Standard"


def test_the_rendered_mode_wins_over_the_clusters_default(kserve: Any, tmp_path: Path) -> None:
    """trainops' default, Knative, on this Standard-default cluster: KServe takes the annotation
    (and, with no Knative Serving here, makes no Deployment and says why in a Warning event)."""
    ns = namespace(kserve, "kserve-knative")
    isvc = inference_service(tmp_path, KNATIVE_CANARY, STABLE, ns)
    assert isvc["metadata"]["annotations"][DEPLOYMENT_MODE] == "Knative"
    kserve.api.apply(isvc)
    name = isvc["metadata"]["name"]

    def recorded() -> bool:
        return bool(kserve.api.get(*ISVC, name, ns).get("status", {}).get("deploymentMode") == "Knative")

    wait_for(recorded, timeout=60, what=f"{name}'s status.deploymentMode Knative", interval=0.5)
    assert kserve.api.list("apps/v1", "Deployment", ns) == []
    conditions = {c["type"]: c for c in kserve.api.get(*ISVC, name, ns)["status"].get("conditions", [])}
    assert conditions.get("PredictorReady", {}).get("status") != "True", conditions

    def rejected() -> bool:
        events = kserve.api.list("v1", "Event", ns)
        return any(e["reason"] == "ServerlessModeRejected" and e["involvedObject"]["name"] == name for e in events)

    wait_for(rejected, timeout=60, what=f"KServe's ServerlessModeRejected event on {name}", interval=0.5)


def test_standard_canary_list_sizes_replicas_and_routes_nothing(kserve: Any, tmp_path: Path) -> None:
    """KServe v0.20's own Standard-mode canary, `spec.canary[]`, is why trainops does not render
    it either: trafficPercent sizes a second Deployment (ceil(replicas × percent)) and takes
    that many pods from the stable one, but the InferenceService's predictor Service selects
    the stable pods only — the canary is reachable through its own Service, not a share of
    the InferenceService's traffic."""
    ns = namespace(kserve, "kserve-canary-list")
    stable = inference_service(tmp_path / "stable", STANDARD, STABLE, ns)
    candidate = inference_service(tmp_path / "candidate", STANDARD, RolloutState(stable=V2), ns)
    canary_predictor = {**candidate["spec"]["predictor"], "name": "candidate"}
    for key in ("minReplicas", "maxReplicas"):  # the canary takes its replicas from trafficPercent
        del canary_predictor[key]
    stable["spec"]["canary"] = [{"predictor": canary_predictor, "trafficPercent": 10}]
    kserve.api.apply(stable)
    name = stable["metadata"]["name"]

    def deployed() -> bool:
        deployments = {d["metadata"]["name"]: d for d in kserve.api.list("apps/v1", "Deployment", ns)}
        return {n: d.get("status", {}).get("readyReplicas") for n, d in deployments.items()} == {
            f"{name}-predictor": 1,
            f"{name}-candidate-predictor": 1,
        }

    wait_for(deployed, timeout=120, what="stable and canary Deployments of one Ready pod each", interval=0.5)
    (stable_pod,) = predictor_pods(kserve, ns, name)
    (canary_pod,) = predictor_pods(kserve, ns, f"{name}-candidate")
    assert releases([stable_pod, canary_pod]) == [V1.release, V2.release]
    service = kserve.api.get("v1", "Service", f"{name}-predictor", ns)
    assert service["spec"]["selector"] == {"app": f"isvc.{name}-predictor"}

    def targets() -> set[str]:
        selector = f"kubernetes.io/service-name={name}-predictor"
        slices = kserve.api.list("discovery.k8s.io/v1", "EndpointSlice", ns, selector=selector)
        return {e["targetRef"]["name"] for s in slices for e in s.get("endpoints") or []}

    wait_for(lambda: bool(targets()), timeout=60, what=f"endpoints of Service {name}-predictor", interval=0.5)
    assert targets() == {stable_pod["metadata"]["name"]}
