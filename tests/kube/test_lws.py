"""Multi-node serving run by the real LeaderWorkerSet controller (issue 24, item 5).

The LeaderWorkerSet is trainops' render of examples/tiny-llm's spec.rollout with a replica
larger than a node (tests/cluster/targets.py, variant ``multi-node-serving``); the test
applies it as the GitOps controller would. The LWS controller v0.10.0 (with its admission
webhooks, served on 127.0.0.1 with the cluster's CA) creates each group's leader and worker
pods, the default scheduler places them on kwok nodes (4 × 8 GPUs), and kwok makes them Ready.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.targets import sent, write_variant
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.cluster.dryrun import Sent, dry_run
from trainops.manifest import Manifest, load_manifest
from trainops.rollout.workload import LWS_GROUP_KEY, LWS_NAME_LABEL
from trainops_testing.kube_cluster import GPU, KubeCluster, Shape, listening
from trainops_testing.kube_jobs import apply, ensure_namespace
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "lws")
LWS = "leaderworkerset.x-k8s.io/v1"
NAMESPACE = "tiny-llm"  # the example's serving namespace
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


@pytest.fixture(autouse=True)
def _no_sets_left(sim: KubeCluster) -> Iterator[None]:
    """The module's cluster is shared: each test's LeaderWorkerSets go, with their pods, and
    every node is schedulable again."""
    yield
    for node in sim.nodes:
        sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": None}})
    for obj in sim.api.list(LWS, "LeaderWorkerSet", NAMESPACE):
        sim.api.delete(LWS, "LeaderWorkerSet", obj["metadata"]["name"], NAMESPACE)
    wait_for(
        lambda: not sim.api.list("v1", "Pod", NAMESPACE, selector=LWS_NAME_LABEL),
        timeout=60,
        what="the LeaderWorkerSets' pods deleted",
    )


def _manifest(directory: Path, **rollout: Any) -> Manifest:
    path = write_variant(directory, "multi-node-serving")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["spec"]["rollout"].update(rollout)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_manifest(path)


def _stable_set(manifest: Manifest) -> Sent:
    """The stable track's LeaderWorkerSet as trainops renders it for the GitOps repository."""
    sets = [i for i in sent(manifest) if i.obj["kind"] == "LeaderWorkerSet"]
    (item,) = [i for i in sets if i.obj["metadata"]["name"].endswith("-stable")]
    return item


def _pods(sim: KubeCluster, name: str) -> list[dict[str, Any]]:
    return list(sim.api.list("v1", "Pod", NAMESPACE, selector=f"{LWS_NAME_LABEL}={name}"))


def _ready(pod: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


def _groups(pods: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """group key → {worker index: node} (index 0 is the leader)."""
    out: dict[str, dict[str, str]] = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        out.setdefault(labels[LWS_GROUP_KEY], {})[labels[WORKER_INDEX]] = pod["spec"].get("nodeName", "")
    return out


def test_the_lws_controller_and_its_webhooks_listen_on_loopback_only(sim: KubeCluster) -> None:
    (proc,) = [p for p in sim.procs if p.name == "lws"]
    sockets = listening([proc.pid])
    assert {port for _, port in sockets} >= {sim.ports["lws"], sim.ports["lws-webhook"]}  # health, webhooks
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sorted(sockets)
    urls = set()
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for config in sim.api.list("admissionregistration.k8s.io/v1", kind):
            for hook in config["webhooks"]:
                urls.add(hook["clientConfig"]["url"].split("/")[2])
                if hook["rules"][0]["resources"] == ["pods"]:  # the release's selector: LWS pods only
                    assert hook["objectSelector"]["matchExpressions"][0]["key"] == LWS_NAME_LABEL
    assert urls == {f"127.0.0.1:{sim.ports['lws-webhook']}"}


def test_each_replica_is_a_leader_and_a_worker_on_distinct_nodes(sim: KubeCluster, tmp_path: Path) -> None:
    # two replicas of 16 GPUs on nodes of 8: two groups of a leader and a worker
    item = _stable_set(_manifest(tmp_path / "v", replicas=2, gpusPerReplica=16, gpusPerNode=8))
    name = item.obj["metadata"]["name"]
    assert item.obj["spec"]["leaderWorkerTemplate"]["size"] == 2
    apply(sim.api, [item.obj])

    def ready_replicas() -> int:
        return int(sim.api.get(LWS, "LeaderWorkerSet", name, NAMESPACE).get("status", {}).get("readyReplicas", 0))

    wait_for(lambda: ready_replicas() == 2, timeout=120, what=f"{name}: 2 groups Ready", log_path=sim.logs / "lws.log")
    groups = _groups(_pods(sim, name))
    assert len(groups) == 2 and all(sorted(group) == ["0", "1"] for group in groups.values()), groups
    for group in groups.values():
        assert group["0"] != group["1"], groups  # the leader and its worker on two nodes
    assert len({node for group in groups.values() for node in group.values()}) == 4
    assert all(_ready(pod) for pod in _pods(sim, name))
    # the leader's group key comes from the LWS pod webhook (its StatefulSet's template has none)
    leader_set = sim.api.get("apps/v1", "StatefulSet", name, NAMESPACE)
    assert LWS_GROUP_KEY not in leader_set["spec"]["template"]["metadata"]["labels"]


def test_a_worker_waits_rather_than_share_its_leaders_node(sim: KubeCluster, tmp_path: Path) -> None:
    """Pods of 4 GPUs on nodes of 8: GPU requests alone would put the worker beside its leader.
    With one node schedulable the worker stays Pending, the scheduler naming the anti-affinity;
    a second node lets it run there."""
    manifest = _manifest(tmp_path / "v", replicas=1, gpusPerReplica=8, gpusPerNode=4, tensorParallel=4)
    item = _stable_set(manifest)
    name = item.obj["metadata"]["name"]
    first, second, *rest = sim.nodes
    for node in (second, *rest):
        sim.api.merge_patch("v1", "Node", node, {"spec": {"unschedulable": True}})
    apply(sim.api, [item.obj])

    def worker_held() -> str:
        pods = {p["metadata"]["labels"][WORKER_INDEX]: p for p in _pods(sim, name)}
        if "1" not in pods or not _ready(pods["0"]):
            return ""
        scheduled = [c for c in pods["1"]["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        return str(scheduled[0].get("message", "")) if scheduled and scheduled[0]["status"] == "False" else ""

    wait_for(lambda: bool(worker_held()), timeout=120, what="the leader Ready, its worker unscheduled")
    assert "didn't match pod anti-affinity rules" in worker_held()
    (group,) = _groups(_pods(sim, name)).values()
    assert group == {"0": first, "1": ""}
    sim.api.merge_patch("v1", "Node", second, {"spec": {"unschedulable": None}})
    wait_for(
        lambda: all(_ready(p) for p in _pods(sim, name)),
        timeout=60,
        what=f"the worker of {name} Ready on {second}",
    )
    (group,) = _groups(_pods(sim, name)).values()
    assert group == {"0": first, "1": second}


def test_a_set_the_lws_webhook_refuses_is_one_line_at_its_manifest_field(sim: KubeCluster, tmp_path: Path) -> None:
    """The webhook checks what the CRD's schema cannot (here a rolling update's maxSurge that is
    neither a number nor a percentage): `validate --kubeconfig`'s dry run reports the refusal (a 403)
    at the manifest field the set comes from, in one line."""
    manifest = _manifest(tmp_path / "v")
    item = _stable_set(manifest)
    item.obj["spec"]["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxSurge": "two"}}
    ensure_namespace(sim.api, NAMESPACE)
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        (problem,) = dry_run(cluster, manifest, [item])
    text = str(problem)
    assert "\n" not in text
    line = next(i for i, row in enumerate(manifest.path.read_text().splitlines(), 1) if row == "  rollout:")
    assert text.startswith(f"{manifest.path}:{line}:")
    assert f"spec.rollout: the cluster refuses LeaderWorkerSet {NAMESPACE}/{item.obj['metadata']['name']}" in text
    assert 'admission webhook "vleaderworkerset.kb.io" denied the request' in text
    assert 'rollingUpdateConfiguration.maxSurge: Invalid value: "two"' in text
    assert "RBAC" not in text  # the webhook's 403 is the object's error, not a permission
    assert sim.api.list(LWS, "LeaderWorkerSet", NAMESPACE) == []  # a dry run: nothing stored


def test_the_dry_run_sends_the_sets_pod_templates_as_pods(sim: KubeCluster, tmp_path: Path) -> None:
    """The API server checks a LeaderWorkerSet's pod templates against the CRD's schema only: a
    bad one is found when the StatefulSet cannot create the pods. The dry run sends each template
    as a Pod: trainops' render passes; a leader asking for fewer GPUs than its limit (which the
    schema allows and a Pod may not) is refused at spec.rollout, naming the template."""
    manifest = _manifest(tmp_path / "v")
    ensure_namespace(sim.api, NAMESPACE)
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        assert dry_run(cluster, manifest, [i for i in sent(manifest) if i.obj["kind"] == "LeaderWorkerSet"]) == []
        item = _stable_set(manifest)
        (engine,) = item.obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
        engine["resources"]["requests"][GPU] = "4"
        (problem,) = dry_run(cluster, manifest, [item])
    text = str(problem)
    assert "\n" not in text
    name = item.obj["metadata"]["name"]
    assert f"spec.rollout: the cluster refuses the pods of LeaderWorkerSet {NAMESPACE}/{name} (" in text
    assert ") from its spec.leaderWorkerTemplate.leaderTemplate: " in text
    assert f"must be equal to {GPU} limit of 8" in text
    assert sim.api.list("v1", "Pod", NAMESPACE) == [] and sim.api.list(LWS, "LeaderWorkerSet", NAMESPACE) == []
