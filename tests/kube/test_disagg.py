"""Disaggregated serving run by the real controllers on the simulated cluster (kwok nodes in racks):
the LeaderWorkerSet controller v0.10.0 makes both roles of each DisaggregatedSet slice; the
InferencePool (v1) and the HTTPRoute are admitted against their CRDs; a canary walked to stable
and an abort back, each commit applied by the stand-in for Argo CD (trainops.cluster.applier.sync)
and read back from the API server.

Not run here: the endpoint picker's routing (it needs serving engines answering its metric
scrapes, which kwok's pods do not run) — its Deployment is admitted and its flags read back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops.cluster.access import ClusterAccess
from trainops.cluster.applier import sync
from trainops.cluster.client import connect
from trainops.render.crds import VENDORED
from trainops.rollout.disagg import DS_NAME_LABEL, LABEL_REVISION, LABEL_ROLE
from trainops_testing.cli import run
from trainops_testing.kube_api import ApiError
from trainops_testing.kube_cluster import RACK_LABEL, KubeCluster, Shape
from trainops_testing.kube_jobs import ensure_namespace
from trainops_testing.services import git_env, wait_for

SLICE_LABEL = "disaggregatedset.x-k8s.io/slice"  # the DisaggregatedSet controller labels each slice's sets and pods

SHAPE = Shape(nodes=8, gpus_per_node=8, racks=4, spines=2)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "lws")
NAMESPACE = "tiny-llm"
SERVE = "clusters/dev-serve"
IMAGE = "harbor.example.com/llm/tiny-llm/serve-vllm@sha256:" + "ab" * 32
CRDS = ("gie-inferencepool", "gateway-httproute", "prometheus-servicemonitor", "prometheus-prometheusrule")
CRDS += ("kserve-llminferenceservice",)


@pytest.fixture(scope="module")
def cluster(sim: KubeCluster) -> KubeCluster:
    sim.install_crds([VENDORED / f"{name}.yaml" for name in CRDS])
    # a CRD Established may still answer 429 (its storage initializing) for a moment: until each lists
    for name in CRDS:
        (doc,) = [d for d in yaml.safe_load_all((VENDORED / f"{name}.yaml").read_text()) if d]
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        version = next(v["name"] for v in doc["spec"]["versions"] if v.get("storage"))
        api_version = f"{group}/{version}"
        wait_for(partial(_lists, sim, api_version, kind), timeout=60, what=f"{kind} served")
    return sim


def _lists(sim: KubeCluster, api_version: str, kind: str) -> bool:
    try:
        sim.api.list(api_version, kind, NAMESPACE)
    except ApiError:
        return False
    return True


@pytest.fixture(autouse=True)
def _git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    yield


@pytest.fixture(autouse=True)
def _nothing_left(cluster: KubeCluster) -> Iterator[None]:
    """The module's cluster is shared: each test's serving objects go, with their pods."""
    yield
    for api_version, kind in (
        ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"),
        ("inference.networking.k8s.io/v1", "InferencePool"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("apps/v1", "Deployment"),
    ):
        for obj in cluster.api.list(api_version, kind, NAMESPACE):
            cluster.api.delete(api_version, kind, obj["metadata"]["name"], NAMESPACE)
    wait_for(lambda: not cluster.api.list("v1", "Pod", NAMESPACE), timeout=60, what="the serving pods deleted")


def _pods(sim: KubeCluster, selector: str = LABEL_ROLE) -> list[dict[str, Any]]:
    return list(sim.api.list("v1", "Pod", NAMESPACE, selector=selector))


def _ready(pod: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True" and pod["metadata"].get("deletionTimestamp") is None


def served_pairs(sim: KubeCluster) -> dict[str, str]:
    """track → the revision of its Ready pods, when every serving pod is Ready and each track runs
    one revision in all 6 pods (2 slices of a prefill and 2 decodes); {} while the controllers work."""
    pods = _pods(sim)
    tracks: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for pod in pods:
        if not _ready(pod):
            return {}
        labels = pod["metadata"]["labels"]
        tracks.setdefault(labels["trainops.dev/track"], set()).add(labels[LABEL_REVISION])
        counts[labels["trainops.dev/track"]] = counts.get(labels["trainops.dev/track"], 0) + 1
    if any(len(revisions) != 1 for revisions in tracks.values()) or any(n != 6 for n in counts.values()):
        return {}
    return {track: revisions.pop() for track, revisions in tracks.items()}


def route_weights(sim: KubeCluster) -> dict[str, int]:
    route = sim.api.get("gateway.networking.k8s.io/v1", "HTTPRoute", "tiny-llm", NAMESPACE)
    return {b["name"]: b["weight"] for b in route["spec"]["rules"][-1]["backendRefs"]}


def pool_revisions(sim: KubeCluster) -> dict[str, str]:
    pools = sim.api.list("inference.networking.k8s.io/v1", "InferencePool", NAMESPACE)
    return {p["metadata"]["name"]: p["spec"]["selector"]["matchLabels"][LABEL_REVISION] for p in pools}


def slice_placement(sim: KubeCluster, track: str) -> dict[str, dict[str, set[str]]]:
    """slice → {"racks": racks of its pods, "nodes": its nodes, "roles": its roles} for one track."""
    racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in sim.api.list("v1", "Node")}
    out: dict[str, dict[str, set[str]]] = {}
    for pod in _pods(sim, f"{LABEL_ROLE},trainops.dev/track={track}"):
        labels = pod["metadata"]["labels"]
        node = pod["spec"]["nodeName"]
        entry = out.setdefault(labels[SLICE_LABEL], {"racks": set(), "nodes": set(), "roles": set()})
        entry["racks"].add(racks[node])
        entry["nodes"].add(node)
        entry["roles"].add(labels[LABEL_ROLE])
    return out


class Walk:
    """A project whose serving tree each step commits, then syncs to the cluster and waits for."""

    def __init__(self, sim: KubeCluster, root: Path) -> None:
        from tests.rollout.test_disagg import TOPOLOGY, overlay
        from trainops_testing.projects import make_project

        self.sim = sim
        self.project = make_project(root, overlay(spec=TOPOLOGY, placement="rack"))

    def step(self, *args: str) -> dict[str, str]:
        outcome = run("rollout", *self.project.cli(*args, "-o", "json"))
        assert outcome.code == 0, outcome.stderr
        commit = json.loads(outcome.stdout)["commit"]
        with connect(ClusterAccess(str(self.sim.kubeconfig))) as api:
            result = sync(api, repo=f"file://{self.project.gitops}", branch="main", path=SERVE, commit=commit)
        assert result.commit == commit
        pools = pool_revisions(self.sim)

        def settled() -> bool:
            served = served_pairs(self.sim)
            return served == {name.rsplit("-", 1)[1]: rev for name, rev in pools.items()}

        wait_for(
            settled,
            timeout=180,
            what=f"{' '.join(args)}: the pods of {pools} Ready",
            log_path=self.sim.logs / "lws.log",
        )
        return pools


def test_a_disaggregated_canary_walks_to_stable_and_an_abort_walks_back(cluster: KubeCluster, tmp_path: Path) -> None:
    walk = Walk(cluster, tmp_path / "p")
    pools = walk.step("start", "tiny-llm/model:v1", "--image", IMAGE)
    v1 = pools["tiny-llm-stable"]
    assert route_weights(cluster) == {"tiny-llm-stable": 100}
    # the LWS controller made both roles of each slice from the DisaggregatedSet
    sets = cluster.api.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", NAMESPACE)
    made = sorted((s["metadata"]["labels"][SLICE_LABEL], s["metadata"]["labels"][LABEL_ROLE]) for s in sets)
    assert made == [("0", "decode"), ("0", "prefill"), ("1", "decode"), ("1", "prefill")]
    assert all(s["metadata"]["labels"][DS_NAME_LABEL] == "tiny-llm-stable" for s in sets)
    # placed together: a slice's prefill and decode in one rack, slices in different racks and nodes
    stable = slice_placement(cluster, "stable")
    assert sorted(stable) == ["0", "1"]
    assert all(len(s["racks"]) == 1 and s["roles"] == {"prefill", "decode"} for s in stable.values()), stable
    assert not stable["0"]["racks"] & stable["1"]["racks"] and not stable["0"]["nodes"] & stable["1"]["nodes"]

    pools = walk.step("start", "tiny-llm/model:v2", "--image", IMAGE)
    v2 = pools["tiny-llm-canary"]
    assert pools == {"tiny-llm-stable": v1, "tiny-llm-canary": v2} and v1 != v2
    assert route_weights(cluster) == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    canary = slice_placement(cluster, "canary")
    assert all(len(s["racks"]) == 1 for s in canary.values()), canary
    used = {rack for s in stable.values() for rack in s["racks"]}
    assert not used & {rack for s in canary.values() for rack in s["racks"]}  # the canary's slices in their own racks
    walk.step("promote")
    assert route_weights(cluster) == {"tiny-llm-stable": 50, "tiny-llm-canary": 50}
    walk.step("promote")
    assert route_weights(cluster) == {"tiny-llm-stable": 0, "tiny-llm-canary": 100}
    pools = walk.step("promote")
    assert pools == {"tiny-llm-stable": v2} and route_weights(cluster) == {"tiny-llm-stable": 100}
    assert not cluster.api.list(
        "disaggregatedset.x-k8s.io/v1", "DisaggregatedSet", NAMESPACE, selector="trainops.dev/track=canary"
    )

    pools = walk.step("start", "tiny-llm/model:v3", "--image", IMAGE)
    assert route_weights(cluster) == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    pools = walk.step("abort")
    assert pools == {"tiny-llm-stable": v2} and route_weights(cluster) == {"tiny-llm-stable": 100}
    assert {p["metadata"]["labels"][LABEL_REVISION] for p in _pods(cluster)} == {v2}


def test_the_endpoint_picker_is_admitted_with_its_pool_and_flags(cluster: KubeCluster, tmp_path: Path) -> None:
    """Its routing needs engines answering its metric scrapes, which kwok's pods do not run: what
    can be read is its Deployment as the API server stored it, and the pool naming it."""
    walk = Walk(cluster, tmp_path / "p")
    pools = walk.step("start", "tiny-llm/model:v1", "--image", IMAGE)
    pool = cluster.api.get("inference.networking.k8s.io/v1", "InferencePool", "tiny-llm-stable", NAMESPACE)
    assert pool["spec"]["endpointPickerRef"]["name"] == "tiny-llm-stable-epp"
    assert pool["spec"]["selector"]["matchLabels"][LABEL_REVISION] == pools["tiny-llm-stable"]
    epp = cluster.api.get("apps/v1", "Deployment", "tiny-llm-stable-epp", NAMESPACE)
    (container,) = epp["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--pool-name") + 1] == "tiny-llm-stable"
    assert args[args.index("--pool-namespace") + 1] == NAMESPACE
    assert args[args.index("--grpc-port") + 1] == str(pool["spec"]["endpointPickerRef"]["port"]["number"])
    config = json.loads(args[args.index("--config-text") + 1])
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
    assert epp["spec"]["template"]["spec"]["serviceAccountName"] == "tiny-llm-stable-epp"
    # the picker may read what it picks from: the API server's own authorizer answers for its account
    user = f"system:serviceaccount:{NAMESPACE}:tiny-llm-stable-epp"
    for group, resource, verb, allowed in (
        ("", "pods", "watch", True),
        ("inference.networking.k8s.io", "inferencepools", "list", True),
        ("", "pods", "delete", False),
        ("", "secrets", "get", False),
    ):
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "user": user,
                "resourceAttributes": {"namespace": NAMESPACE, "group": group, "resource": resource, "verb": verb},
            },
        }
        answer = cluster.api.create(review)
        assert answer["status"].get("allowed", False) is allowed, (resource, verb, answer["status"])
    svc = cluster.api.get("v1", "Service", "tiny-llm-stable-epp", NAMESPACE)
    assert svc["spec"]["ports"][0]["port"] == pool["spec"]["endpointPickerRef"]["port"]["number"]


def test_kserves_llm_inference_services_and_the_route_are_admitted(cluster: KubeCluster, tmp_path: Path) -> None:
    """The KServe target, as trainops renders it mid-canary, through the API server with KServe's
    CRD (its schema and CEL rules): admitted for real. KServe's controller is not run here, so its
    pools, pickers and Deployments are not made."""
    from tests.rollout.helpers import tree
    from tests.rollout.test_disagg import overlay

    rendered = tree(tmp_path, overlay(workload="llm-inference-service", endpointPicker=None))
    sent = [o for o in rendered.objects if o["kind"] in ("LLMInferenceService", "HTTPRoute")]
    ensure_namespace(cluster.api, NAMESPACE)
    for obj in sent:
        cluster.api.apply(obj)
    stored = cluster.api.list("serving.kserve.io/v1alpha2", "LLMInferenceService", NAMESPACE)
    assert sorted(s["metadata"]["labels"]["trainops.dev/track"] for s in stored) == ["canary", "stable"]
    for service in stored:
        assert service["spec"]["prefill"]["parallelism"]["tensor"] == 2
        assert service["spec"]["router"]["route"]["http"]["refs"] == [{"name": "tiny-llm"}]
    names = {s["metadata"]["name"] + "-inference-pool" for s in stored}
    assert set(route_weights(cluster)) == names
    for service in stored:
        cluster.api.delete("serving.kserve.io/v1alpha2", "LLMInferenceService", service["metadata"]["name"], NAMESPACE)
