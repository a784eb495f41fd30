"""trainops reads the cluster (issue 23, items 5 and 6): a run submitted through git, applied by
the stand-in for Argo CD (trainops.cluster.applier.sync), then `train status`, `train logs`
and `train cancel` on the simulated cluster (Volcano on kwok nodes); credentials the API
server refuses (401) or a user RBAC does not allow (403) are one line, exit 6."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops.cluster.access import ClusterAccess
from trainops.cluster.applier import TRACKING_LABEL, sync
from trainops.cluster.client import connect
from trainops.errors import RemoteError
from trainops.manifest import load_manifest
from trainops.train.kube_jobs import RunState, run_states, wait_finished
from trainops_testing.cli import run
from trainops_testing.kube_cluster import EXIT_ANNOTATION as EXIT
from trainops_testing.services import git_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
PATH = "clusters/dev"


@pytest.fixture(scope="module")
def kube_cluster(kube_cluster_factory: Any) -> Iterator[Any]:
    """What these reads need: the control plane, kwok nodes and Volcano (no Kueue, JobSet)."""
    cluster = kube_cluster_factory(components=("etcd", "apiserver", "controller-manager", "kwok", "volcano"))
    yield cluster
    cluster.stop()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, kube_cluster: Any) -> Iterator[Path]:
    """tiny-llm on Volcano in a namespace and queue of its own, its GitOps repo a bare repo."""
    namespace = f"reads-{uuid.uuid4().hex[:6]}"
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    spec["gitops"]["repo"] = f"file://{git_remote}"
    spec["registry"] = "oci://registry.example.com/llm"
    spec["train"].update(namespace=namespace, queue=namespace, priorityClass=None, maxRunDuration=None)
    spec["tenants"] = [{"name": namespace, "namespaces": [namespace], "gpus": {"capability": 128}}]
    spec["patches"] = []
    spec.pop("slo", None)  # this cluster has no prometheus-operator CRDs for the SLOs' rules and monitors
    root = tmp_path / "proj"
    root.mkdir()
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.chdir(root)
    monkeypatch.setenv("KUBECONFIG", str(kube_cluster.kubeconfig))
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in git_env().items():
        if name.startswith("GIT_"):
            monkeypatch.setenv(name, value)
    yield root
    with connect(ClusterAccess(str(kube_cluster.kubeconfig))) as cluster:
        cluster.delete("v1", "Namespace", namespace)
        cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", namespace)


def _sync(remote: Path, kube_cluster: Any) -> Any:
    with connect(ClusterAccess(str(kube_cluster.kubeconfig))) as cluster:
        return sync(cluster, repo=str(remote), branch="main", path=PATH)


def _wait(root: Path, run_id: str, done: Any, *, timeout: float = 90) -> RunState:
    manifest = load_manifest(root / "trainops.yaml")
    assert manifest.pipeline.spec.train is not None
    deadline = time.monotonic() + timeout
    with connect() as cluster:
        while True:
            states = run_states(cluster, train=manifest.pipeline.spec.train, pipeline="tiny-llm", run_id=run_id)
            if done(states[0]):
                return states[0]
            assert time.monotonic() < deadline, f"run {run_id} stayed {states[0]}"
            time.sleep(0.5)


def test_status_logs_and_cancel_of_a_run_on_the_cluster(project: Path, git_remote: Path, kube_cluster: Any) -> None:
    assert run("train", "submit", "--image", IMAGE, "--run-id", "r1").code == 0
    synced = _sync(git_remote, kube_cluster)
    assert [a.split(" ")[0] for a in synced.applied] == ["Queue", "Job"] and synced.pruned == []

    state = _wait(project, "r1", lambda s: s.phase == "Running" and all(p.node for p in s.pods) and len(s.pods) == 2)
    nodes = {p.node for p in state.pods}
    assert len(nodes) == 2 and nodes <= set(kube_cluster.nodes)  # gang: 2 pods on 2 nodes

    out = run("train", "status", "r1", "-o", "json")
    assert out.code == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["runId"] == "r1" and data["phase"] == "Running" and data["kind"] == "batch.volcano.sh/v1alpha1 Job"
    assert sorted(p["node"] for p in data["pods"]) == sorted(nodes)
    text = run("train", "status")
    assert text.code == 0 and text.stdout.startswith("r1  Job ") and " Running  restarts 0" in text.stdout

    logs = run("train", "logs", "r1")
    # kwok nodes have no kubelet: kube-apiserver answers 500 (its dial to the kubelet refused),
    # retried, then one error line naming the first pod (tests/cluster/test_pod_logs.py)
    assert logs.code == 6, logs.stderr
    first = sorted(p.name for p in state.pods)[0]
    assert logs.stderr.splitlines()[-1].startswith(f"Error: logs of pod {state.namespace}/{first}: GET ")
    assert "kept failing: 500 " in logs.stderr and "connection refused" in logs.stderr

    cancelled = run("train", "cancel", "r1")
    assert cancelled.code == 0, cancelled.stderr
    synced = _sync(git_remote, kube_cluster)
    assert synced.pruned == [f"Job {state.namespace}/{state.name}"]
    with connect() as cluster:
        assert cluster.get("batch.volcano.sh/v1alpha1", "Job", state.name, namespace=state.namespace) is None
        queue = cluster.get("scheduling.volcano.sh/v1beta1", "Queue", state.namespace)
        assert queue is not None and queue["metadata"]["labels"][TRACKING_LABEL]


def test_a_gang_that_cannot_fit_is_pending_with_the_podgroup_reason(
    project: Path, git_remote: Path, kube_cluster: Any
) -> None:
    manifest = project / "trainops.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc["spec"]["train"]["nodes"] = len(kube_cluster.nodes) + 1
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run("train", "submit", "--image", IMAGE, "--run-id", "big").code == 0
    _sync(git_remote, kube_cluster)

    state = _wait(project, "big", lambda s: s.reason is not None)
    assert state.phase == "Pending" and all(p.node is None for p in state.pods)
    assert state.reason.startswith("PodGroup ") and "Unschedulable" in state.reason
    out = run("train", "status", "big")
    # Volcano rewrites the condition's message as it re-evaluates the gang ("0/0 tasks in gang
    # unschedulable …", then "queue resource quota insufficient …"): the PodGroup, its phase,
    # queue and reason stay
    head = state.reason.split(" Unschedulable: ")[0] + " Unschedulable: "
    assert out.code == 0 and f"  reason {head}" in out.stdout, out.stdout


def _user_kubeconfig(kube_cluster: Any, tmp_path: Path, user: dict[str, str]) -> Path:
    doc = yaml.safe_load(Path(kube_cluster.kubeconfig).read_text())
    doc["users"][0]["user"] = user
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_refused_credentials_and_forbidden_users_are_one_line_exit_6(kube_cluster: Any, tmp_path: Path) -> None:
    bad_token = _user_kubeconfig(kube_cluster, tmp_path, {"token": "not-a-token-the-server-knows"})
    out = run("train", "status", "-f", str(EXAMPLE), "--kubeconfig", str(bad_token))
    assert out.code == 6 and out.stderr.count("\n") == 1
    assert "refused the credentials of context" in out.stderr and "401 Unauthorized" in out.stderr

    # a client certificate the cluster's CA signed for a user RBAC grants nothing
    pki = Path(kube_cluster.pki)
    key, csr, cert = tmp_path / "nobody.key", tmp_path / "nobody.csr", tmp_path / "nobody.crt"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "req", "-new", "-key", str(key), "-subj", "/CN=nobody", "-out", str(csr)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(pki / "ca.crt"),
            "-CAkey",
            str(pki / "ca.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    nobody = _user_kubeconfig(kube_cluster, tmp_path, {"client-certificate": str(cert), "client-key": str(key)})
    out = run("train", "status", "-f", str(EXAMPLE), "--kubeconfig", str(nobody))
    assert out.code == 6 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("Error: forbidden (403): ") and 'User "nobody" cannot' in out.stderr


def test_training_is_finished_when_the_job_is(project: Path, git_remote: Path, kube_cluster: Any) -> None:
    """What `trainops run --executor cluster --kubeconfig` waits on: the job's status, not a quiet period."""
    manifest_path = project / "trainops.yaml"
    doc = yaml.safe_load(manifest_path.read_text())
    doc["spec"]["train"]["nodes"] = 1
    manifest_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run("train", "submit", "--image", IMAGE, "--run-id", "r3").code == 0
    _sync(git_remote, kube_cluster)
    running = _wait(project, "r3", lambda s: s.phase == "Running")
    train = load_manifest(manifest_path).pipeline.spec.train
    assert train is not None
    seen: list[str] = []

    def wait(timeout: float) -> RunState:
        with connect() as cluster:
            return wait_finished(
                cluster,
                train=train,
                pipeline="tiny-llm",
                run_id="r3",
                timeout=timeout,
                poll=0.2,
                on_change=lambda s: seen.append(s.phase if s else "absent"),
            )

    with pytest.raises(RemoteError, match=r"timed out after 1 s waiting for run r3's job \(Running\)"):
        wait(1.0)  # running, and no checkpoint will tell: it keeps waiting
    with connect() as cluster:
        for pod in running.pods:
            path = cluster.path_of("v1", "Pod", namespace=running.namespace, name=pod.name)
            patch = json.dumps({"metadata": {"annotations": {EXIT: "0"}}})
            answer = cluster.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
            assert answer.status_code == 200, answer.text
    done = wait(60.0)
    assert done.phase == "Completed" and done.finished and not done.failed
    assert seen[0] == "Running" and seen[-1] == "Completed"
