"""The ray target on the real KubeRay operator (v1.5.0): a RayJob submitted through git and
applied by the stand-in for Argo CD (trainops.cluster.applier.sync) becomes a RayCluster,
whose head and worker pods the default scheduler places on kwok nodes and kwok runs; the
operator then creates the submitter Job (submissionMode K8sJobMode) and its pod runs.

What kwok cannot do: its pods run no containers, so no Ray starts and no dashboard answers
at the head Service (whose DNS name does not resolve here either). The operator keeps asking
it, so a RayJob never learns its Ray job's status from Ray; what it learns from Kubernetes is
tested: the submitter Job failing fails the RayJob (SubmissionFailed), whose RayCluster is
then deleted (shutdownAfterJobFinishes). `train status`, `train logs`, `train watch --once`
and `train cancel` read and end it through trainops.train, as for every Kubernetes kind.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_train_cli import enter_project
from tests.cluster.test_reads import _sync, _wait
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.render.names import LABEL_ROLE, LABEL_RUN_ID
from trainops.train.kube_jobs import RunState
from trainops_testing.cli import run
from trainops_testing.kube_api import ApiError
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import finish_pods
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "kuberay")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
PATH = "clusters/dev"
RAY = "ray.io/v1"


def write_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, **train: Any) -> Path:
    """tiny-llm on the ray target in tmp_path/proj (the working directory), no queue (the
    default scheduler), no tenants, patches or SLOs, its GitOps repo `git_remote`; `train`
    over spec.train."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    spec["gitops"]["repo"] = f"file://{git_remote}"
    spec["registry"] = "oci://registry.example.com/llm"
    spec["train"].update(scheduler="ray", queue=None, priorityClass=None, topology=None, **train)
    spec["tenants"] = []
    spec["patches"] = []
    spec.pop("slo", None)  # no prometheus-operator CRDs on these clusters
    return enter_project(tmp_path, monkeypatch, doc)


def alone(project: Path) -> None:
    """The manifest with its training only: no environments, serving or Argo CD Application."""
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc.pop("environments", None)
    doc["spec"].pop("rollout", None)
    doc["spec"]["gitops"].pop("argocd", None)
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster) -> Iterator[Path]:
    """3 nodes (a head and 2 workers of 8 GPUs) in a namespace of its own; the submitter Job
    is not retried, so one failed submitter pod fails it, and the RayJob is not retried."""
    namespace = f"ray-{uuid.uuid4().hex[:6]}"
    retries = {"maxRetry": 0}
    root = write_project(tmp_path, monkeypatch, git_remote, nodes=3, namespace=namespace, faultTolerance=retries)
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    doc["spec"]["patches"] = [
        {"target": {"kind": "RayJob"}, "merge": {"spec": {"submitterConfig": {"backoffLimit": 0}}}}
    ]
    doc["spec"]["registry"] = f"file://{tmp_path / 'registry'}"  # where train watch records incidents
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))
    yield root
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        for job in cluster.list(RAY, "RayJob", namespace=namespace):
            cluster.delete(RAY, "RayJob", job["metadata"]["name"], namespace=namespace)
        cluster.delete("v1", "Namespace", namespace)


def _absent(sim: KubeCluster, kind: str, name: str, namespace: str) -> bool:
    try:
        sim.api.get(RAY, kind, name, namespace)
    except ApiError:
        return True
    return False


def _roles(state: RunState, sim: KubeCluster) -> dict[str, list[str]]:
    """role label → the nodes of the run's pods in that role."""
    out: dict[str, list[str]] = {}
    pods = sim.api.list("v1", "Pod", state.namespace, selector=f"{LABEL_RUN_ID}={state.run_id}")
    for pod in pods:
        out.setdefault(pod["metadata"]["labels"][LABEL_ROLE], []).append(pod["spec"].get("nodeName") or "")
    return out


def test_the_operator_makes_the_cluster_kwok_runs_it_and_trainops_reads_and_ends_it(
    project: Path, git_remote: Path, sim: KubeCluster
) -> None:
    assert run("train", "submit", "--image", IMAGE, "--run-id", "r1").code == 0
    synced = _sync(git_remote, sim)
    assert [a.split(" ")[0] for a in synced.applied] == ["RayJob"]

    # RayJob → RayCluster → head + 2 workers placed (8 GPUs each: 3 nodes) → submitter Job → its
    # pod; and the RayJob saying so (KubeRay writes jobDeploymentStatus Running once it has made
    # the submitter Job, whose pod may run before that write)
    state = _wait(
        project,
        "r1",
        lambda s: s.phase == "Running" and len(s.pods) == 4 and all(p.node and p.phase == "Running" for p in s.pods),
    )
    assert state.kind == "ray.io/v1 RayJob"
    roles = _roles(state, sim)
    assert sorted(roles) == ["leader", "submitter", "worker"] and len(roles["worker"]) == 2
    assert len(set(roles["leader"] + roles["worker"])) == 3
    job = sim.api.get(RAY, "RayJob", state.name, state.namespace)
    cluster_name = job["status"]["rayClusterName"]
    cluster = sim.api.get(RAY, "RayCluster", cluster_name, state.namespace)
    assert cluster["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert cluster["status"]["state"] == "ready"
    assert job["status"]["jobDeploymentStatus"] == "Running" and job["spec"]["entrypoint"] == "python -m tiny_llm.train"

    out = run("train", "status", "r1", "-o", "json")
    assert out.code == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["phase"] == "Running" and data["kind"] == "ray.io/v1 RayJob" and len(data["pods"]) == 4
    watched = run("train", "watch", "r1", "--once")
    assert watched.code == 0, watched.stderr

    logs = run("train", "logs", "r1")
    # kwok nodes have no kubelet: the error names the run's first pod, one of the Ray cluster's
    assert logs.code == 6, logs.stderr
    first = sorted(p.name for p in state.pods)[0]
    assert logs.stderr.splitlines()[-1].startswith(f"Error: logs of pod {state.namespace}/{first}: GET ")

    # the submitter fails (as `ray job submit` would when the job cannot be submitted): the
    # RayJob fails, and its RayCluster goes at once, freeing the GPUs
    assert finish_pods(sim.api, state.namespace, f"{LABEL_RUN_ID}=r1,{LABEL_ROLE}=submitter", code=1) == 1
    failed = _wait(project, "r1", lambda s: s.phase == "Failed")
    assert failed.reason is not None and failed.reason.startswith("SubmissionFailed: Job submission has failed.")
    wait_for(
        lambda: _absent(sim, "RayCluster", cluster_name, state.namespace),
        timeout=60,
        what="the failed RayJob's RayCluster deleted",
    )
    text = run("train", "status", "r1")
    assert text.code == 0 and " Failed " in text.stdout and "SubmissionFailed" in text.stdout, text.stdout

    cancelled = run("train", "cancel", "r1")
    assert cancelled.code == 0, cancelled.stderr
    assert _sync(git_remote, sim).pruned == [f"RayJob {state.namespace}/{state.name}"]
    wait_for(lambda: _absent(sim, "RayJob", state.name, state.namespace), timeout=60, what="the RayJob pruned")


def test_validate_kubeconfig_sends_the_rayjob_and_its_pods(project: Path, sim: KubeCluster) -> None:
    """The RayJob dry-run applied, its three pod templates as Pods: a head whose GPU request
    differs from its limit (a patch) passes the RayJob's schema but not the Pod's validation."""
    alone(project)
    sim.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _namespace(project)}})
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 0, out.stdout + out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("cluster (base)")]
    assert line.startswith("cluster (base): 3 objects sent"), line  # the RayJob, the eval Job and its ConfigMap
    assert "refused" not in out.stdout

    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    head = {"name": "ray-head", "resources": {"requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 8}}}
    template = {"spec": {"containers": [head]}}
    doc["spec"]["patches"].append(
        {"target": {"kind": "RayJob"}, "merge": {"spec": {"rayClusterSpec": {"headGroupSpec": {"template": template}}}}}
    )
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    refused = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert refused.code == 3
    (said,) = [line for line in refused.stderr.splitlines() if "the cluster refuses the pods of RayJob" in line]
    assert "from its spec.rayClusterSpec.headGroupSpec.template" in said and "must be equal to" in said, said


def _namespace(project: Path) -> str:
    return str(yaml.safe_load((project / "trainops.yaml").read_text())["spec"]["train"]["namespace"])
