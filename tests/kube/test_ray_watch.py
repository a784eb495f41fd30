"""`train watch` on a RayJob, as on every Kubernetes kind: a node of the run lost, the watch
restarts the run away from it through git (the RayJob removed, then back with the node
excluded in the head's, the workers' and the submitter's pod templates); KubeRay (v1.5.0)
makes a new RayCluster, placed on the nodes left. The GitOps controller is the stand-in
syncing loop and `train watch` the real CLI of tests/faults/test_kube_watch.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_train_cli import IMAGE, _git
from tests.faults.test_kube_watch import GitOpsController, Watcher, _cli, _incidents, _running_nodes, _wait_recovered
from tests.kube.test_ray import write_project
from trainops.render.names import LABEL_ROLE, LABEL_RUN_ID
from trainops_testing.kube_api import ApiError
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import finish_pods
from trainops_testing.services import LOOPBACK, free_port, wait_for

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "kuberay")
NAMESPACE = "tiny-llm"  # tests/faults/test_kube_watch.py's Watcher reads the run's pods there


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster) -> Path:
    """A head and a worker; incidents recorded in a local registry; neither the RayJob nor its
    submitter retried (the test ends the run by failing its submitter)."""
    root = write_project(tmp_path, monkeypatch, git_remote, nodes=2, namespace=NAMESPACE)
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    doc["spec"]["registry"] = f"file://{tmp_path / 'registry'}"
    doc["spec"]["train"]["metricsAddress"] = f"{LOOPBACK}:{free_port()}"  # where `train watch` serves the run's
    no_retry = {"backoffLimit": 0, "submitterConfig": {"backoffLimit": 0}}
    doc["spec"]["patches"] = [{"target": {"kind": "RayJob"}, "merge": {"spec": no_retry}}]
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def test_a_lost_node_restarts_the_rayjob_elsewhere_through_git(
    project: Path, git_remote: Path, sim: KubeCluster
) -> None:
    with GitOpsController(sim.kubeconfig, f"file://{git_remote}") as gitops:
        assert _cli(project, "train", "submit", "--image", IMAGE, "--run-id", "w1").returncode == 0
        # the head, the worker (8 GPUs each: 2 nodes) and the submitter
        wait_for(lambda: len(_pods_on_nodes(sim, "w1")) == 3, timeout=90, what="run w1's RayCluster running")
        watcher = Watcher(sim, project, "w1")
        before = _running_nodes(sim.api, "w1")
        wait_for(lambda: watcher.watching(before), timeout=60, what="train watch looking at the run")
        head = _pods_on_nodes(sim, "w1")["leader"]
        commits = int(_git(git_remote, "rev-list", "--count", "main"))
        sim.api.delete("v1", "Node", head)
        _wait_recovered(project, "w1", watcher)
        # the new RayJob's own cluster and its own submitter (not the old one's, which KubeRay
        # would take for its own if the restart had not waited for it to go)
        new = sim.api.get("ray.io/v1", "RayJob", "tiny-llm-w1", NAMESPACE)
        wait_for(lambda: len(_owned_pods(sim, new)) == 3, timeout=90, what="the new RayJob's pods running")
        after = _owned_pods(sim, new)
        assert gitops.errors == []
        # the run ends: its submitter fails, so does the RayJob, and the watch stops
        finish_pods(sim.api, NAMESPACE, f"{LABEL_RUN_ID}=w1,{LABEL_ROLE}=submitter", code=1)
        assert watcher.proc.wait(timeout=120) == 0, watcher.stderr()

    [incident] = _incidents(project, "w1")
    assert (incident.fault, incident.action, incident.node) == ("node-lost", "requeue", head)
    assert head not in after.values() and len({after["leader"], after["worker"]}) == 2
    assert int(_git(git_remote, "rev-list", "--count", "main")) == commits + 2
    job = yaml.safe_load(_git(git_remote, "show", "main:clusters/dev/train/rayjob.yaml"))
    spec = job["spec"]
    templates = [
        spec["rayClusterSpec"]["headGroupSpec"]["template"],
        spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"],
        spec["submitterPodTemplate"],
    ]
    away = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [head]}
    for template in templates:
        terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert away in terms["nodeSelectorTerms"][0]["matchExpressions"]


def _owned_pods(sim: KubeCluster, job: dict[str, Any]) -> dict[str, str]:
    """role → node of the running pods of this RayJob's RayCluster and submitter Job."""
    status = sim.api.get("ray.io/v1", "RayJob", job["metadata"]["name"], NAMESPACE).get("status") or {}
    cluster = status.get("rayClusterName")
    if not cluster:
        return {}
    out = {}
    for pod in sim.api.list("v1", "Pod", NAMESPACE, selector=f"{LABEL_RUN_ID}=w1"):
        meta, node = pod["metadata"], pod["spec"].get("nodeName")
        if pod.get("status", {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        if meta["labels"].get("ray.io/cluster") == cluster:
            out[meta["labels"][LABEL_ROLE]] = node
        elif meta["labels"][LABEL_ROLE] == "submitter" and _submitted_by(sim, job, meta):
            out["submitter"] = node
    return out


def _submitted_by(sim: KubeCluster, job: dict[str, Any], pod_meta: dict[str, Any]) -> bool:
    """Is the pod of the submitter Job this RayJob (its uid) owns?"""
    owner = next((o for o in pod_meta.get("ownerReferences") or [] if o["kind"] == "Job"), None)
    if owner is None:
        return False
    try:
        submitter = sim.api.get("batch/v1", "Job", owner["name"], NAMESPACE)
    except ApiError:
        return False
    return any(o["uid"] == job["metadata"]["uid"] for o in submitter["metadata"].get("ownerReferences") or [])


def _pods_on_nodes(sim: KubeCluster, run_id: str) -> dict[str, str]:
    """role → node of RUN's running pods (one per role: the head, the one worker, the submitter)."""
    pods = sim.api.list("v1", "Pod", NAMESPACE, selector=f"{LABEL_RUN_ID}={run_id}")
    return {
        p["metadata"]["labels"][LABEL_ROLE]: p["spec"]["nodeName"]
        for p in pods
        if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }
