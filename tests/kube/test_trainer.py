"""The kubeflow target on the real Kubeflow Trainer controller (v2.3.0, its webhooks served):
a TrainJob and trainops' TrainingRuntime, submitted through git and applied by the stand-in
for Argo CD (trainops.cluster.applier.sync), become a JobSet (the real JobSet controller)
whose pods the default scheduler places on kwok nodes; `train status`, `train logs`, `train
watch --once` and `train cancel` read and end it through trainops.train, as every Kubernetes
kind. Then the same over the cluster's own torch-distributed ClusterTrainingRuntime (the
run's labels and volumes as a RuntimePatch), and a runtime the cluster lacks.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_train_cli import enter_project
from tests.cluster.targets import write_variant
from tests.cluster.test_reads import _sync, _wait
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.render.names import LABEL_RUN_ID
from trainops_testing.cli import run
from trainops_testing.kube_api import ApiError
from trainops_testing.kube_bins import upstream
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import finish_pods
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, gpus_per_node=8, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "jobset", "trainer")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"


def write_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, **train: Any) -> Path:
    """tiny-llm on the kubeflow target in tmp_path/proj (the working directory), no queue (the
    default scheduler places the pods), training only (no environments, tenants, patches,
    serving, SLOs or Argo CD Application), its GitOps repo `git_remote`; `train` over spec.train."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    spec["gitops"]["repo"] = f"file://{git_remote}"
    spec["gitops"].pop("argocd", None)
    spec["registry"] = f"file://{tmp_path / 'registry'}"  # where train watch records incidents
    spec["train"].update(scheduler="kubeflow", queue=None, priorityClass=None, topology=None, **train)
    spec["tenants"] = []
    spec["patches"] = []
    for key in ("slo", "rollout"):
        spec.pop(key, None)
    doc.pop("environments", None)
    return enter_project(tmp_path, monkeypatch, doc)


@pytest.fixture
def namespace(sim: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"kf-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))
    yield name
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        for job in cluster.list(TRAINER, "TrainJob", namespace=name):
            cluster.delete(TRAINER, "TrainJob", job["metadata"]["name"], namespace=name)
        cluster.delete("v1", "Namespace", name)


def _absent(sim: KubeCluster, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
    try:
        sim.api.get(api_version, kind, name, namespace)
    except ApiError:
        return True
    return False


def _placed(pods: int) -> Any:
    """The run's pods placed and Running, and the TrainJob saying so (the Trainer writes its
    jobsStatus after the JobSet controller has seen the pods)."""
    return lambda s: (
        s.phase == "Running" and len(s.pods) == pods and all(p.node and p.phase == "Running" for p in s.pods)
    )


def test_the_trainer_makes_a_jobset_kwok_runs_it_and_trainops_reads_and_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster, namespace: str
) -> None:
    project = write_project(tmp_path, monkeypatch, git_remote, namespace=namespace, nodes=2)
    submitted = run("train", "submit", "--image", IMAGE, "--run-id", "r1", "--kubeconfig", str(sim.kubeconfig))
    assert submitted.code == 0, submitted.stderr  # the cluster runs the Trainer: nothing to say
    synced = _sync(git_remote, sim)
    assert [a.split(" ")[0] for a in synced.applied] == ["TrainingRuntime", "TrainJob"]

    # TrainJob → JobSet (owned by it) → one Indexed Job of 2 pods, 8 GPUs each: 2 nodes
    state = _wait(project, "r1", _placed(2))
    assert state.kind == f"{TRAINER} TrainJob" and state.phase == "Running"
    # applied again, as Argo CD keeps doing: what the Trainer's webhooks stored is what git holds
    # (its spec.trainer is immutable: other text for the same quantity would be refused)
    assert [a.split(" ")[0] for a in _sync(git_remote, sim).applied] == ["TrainingRuntime", "TrainJob"]
    assert len({p.node for p in state.pods}) == 2
    jobset = sim.api.get(JOBSET, "JobSet", state.name, state.namespace)
    assert [o["kind"] for o in jobset["metadata"]["ownerReferences"]] == ["TrainJob"]
    pod = sim.api.get("v1", "Pod", state.pods[0].name, state.namespace)
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["ckpt-restore", "dataset-corpus", "ckpt-watch"]
    (node,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    # the TrainJob's image and environment, and the Trainer's own PET_* beside them
    assert node["image"] == IMAGE and env["TRAINOPS_RUN_ID"] == "r1" and env["PET_NNODES"] == "2"
    assert env["PET_MASTER_ADDR"] == f"{state.name}-node-0-0.{state.name}"
    assert f"--rdzv-endpoint={env['PET_MASTER_ADDR']}:29500" in node["command"]

    out = run("train", "status", "r1", "-o", "json")
    assert out.code == 0, out.stderr
    data = yaml.safe_load(out.stdout)
    assert data["phase"] == "Running" and data["kind"] == f"{TRAINER} TrainJob" and len(data["pods"]) == 2
    watched = run("train", "watch", "r1", "--once")
    assert watched.code == 0, watched.stderr
    logs = run("train", "logs", "r1")
    # kwok nodes have no kubelet: the error names the run's first pod, one of the JobSet's
    assert logs.code == 6, logs.stderr
    first = sorted(p.name for p in state.pods)[0]
    assert logs.stderr.splitlines()[-1].startswith(f"Error: logs of pod {state.namespace}/{first}: GET ")

    # every rank exits 0: the JobSet completes, and with it the TrainJob
    assert finish_pods(sim.api, state.namespace, f"{LABEL_RUN_ID}=r1", code=0) == 2
    done = _wait(project, "r1", lambda s: s.finished)
    assert done.phase == "Completed", done
    text = run("train", "status", "r1")
    assert text.code == 0 and " Completed " in text.stdout, text.stdout

    cancelled = run("train", "cancel", "r1")
    assert cancelled.code == 0, cancelled.stderr
    pruned = _sync(git_remote, sim).pruned
    assert sorted(pruned) == [f"TrainJob {namespace}/{state.name}", f"TrainingRuntime {namespace}/{state.name}"]
    wait_for(
        lambda: (
            _absent(sim, TRAINER, "TrainJob", state.name, namespace)
            and _absent(sim, TRAINER, "TrainingRuntime", state.name, namespace)
            and _absent(sim, JOBSET, "JobSet", state.name, namespace)
        ),
        timeout=60,
        what="the TrainJob, its runtime and its JobSet gone",
    )


def test_a_rank_that_fails_with_no_restart_left_fails_the_trainjob_and_status_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster, namespace: str
) -> None:
    """faultTolerance.maxRetry 0: the runtime's JobSet restarts nothing, so one rank exiting 1
    fails the JobSet, and the Trainer fails the TrainJob; `train status` gives its condition."""
    project = write_project(tmp_path, monkeypatch, git_remote, namespace=namespace, faultTolerance={"maxRetry": 0})
    assert run("train", "submit", "--image", IMAGE, "--run-id", "f1").code == 0
    _sync(git_remote, sim)
    state = _wait(project, "f1", _placed(2))
    assert finish_pods(
        sim.api, state.namespace, f"{LABEL_RUN_ID}=f1,batch.kubernetes.io/job-completion-index=1", code=1
    )
    failed = _wait(project, "f1", lambda s: s.finished)
    assert failed.phase == "Failed" and failed.failed and failed.reason and failed.reason.startswith("Failed: "), failed
    text = run("train", "status", "f1")
    assert text.code == 0 and " Failed " in text.stdout and f"reason {failed.reason}" in text.stdout, text.stdout


def _cluster_runtime(sim: KubeCluster) -> None:
    """Upstream's torch-distributed ClusterTrainingRuntime (v2.3.0's manifests), as an
    administrator installs the Trainer's runtimes."""
    doc = yaml.safe_load((upstream("trainer") / "manifests/base/runtimes/torch_distributed.yaml").read_text())
    sim.api.apply(doc)


def test_over_the_clusters_runtime_the_runs_labels_and_volumes_arrive_as_a_runtime_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster, namespace: str
) -> None:
    _cluster_runtime(sim)
    kubeflow = {"runtime": "torch-distributed"}
    project = write_project(tmp_path, monkeypatch, git_remote, namespace=namespace, kubeflow=kubeflow, datasets=[])
    submitted = run("train", "submit", "--image", IMAGE, "--run-id", "r2", "--kubeconfig", str(sim.kubeconfig))
    assert submitted.code == 0, submitted.stderr
    assert [a.split(" ")[0] for a in _sync(git_remote, sim).applied] == ["TrainJob"]

    # found by the run's labels, which only the RuntimePatch puts on the runtime's pods
    state = _wait(project, "r2", _placed(2))
    pod = sim.api.get("v1", "Pod", state.pods[0].name, state.namespace)
    assert {v["name"] for v in pod["spec"]["volumes"]} >= {"dshm", "checkpoints"}
    (node,) = pod["spec"]["containers"]
    assert node["name"] == "node" and node["image"] == IMAGE
    assert {m["mountPath"] for m in node["volumeMounts"]} >= {"/dev/shm", "/ckpt"}
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000


def test_a_runtime_the_cluster_lacks_is_one_line_at_the_field_and_nothing_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster, namespace: str
) -> None:
    _cluster_runtime(sim)
    kubeflow = {"runtime": "torch-distrib"}
    write_project(tmp_path, monkeypatch, git_remote, namespace=namespace, kubeflow=kubeflow, datasets=[])
    sim.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3, out.stdout + out.stderr
    (line,) = [line for line in out.stderr.splitlines() if "torch-distrib" in line]
    assert ": spec.train.kubeflow.runtime: the cluster has no ClusterTrainingRuntime torch-distrib: " in line, line
    assert "it has torch-distributed" in line

    out = run("train", "submit", "--image", IMAGE, "--run-id", "r3", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3, out.stderr
    assert "spec.train.kubeflow.runtime: the cluster has no ClusterTrainingRuntime torch-distrib" in out.stderr
    refs = subprocess.run(["git", "--git-dir", str(git_remote), "for-each-ref"], capture_output=True, text=True)
    assert refs.returncode == 0 and refs.stdout == ""  # nothing pushed


def test_validate_kubeconfig_sends_the_runtime_and_the_trainjob_through_the_trainers_webhooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_remote: Path, sim: KubeCluster, namespace: str
) -> None:
    write_project(tmp_path, monkeypatch, git_remote, namespace=namespace)
    sim.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 0, out.stdout + out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("cluster (base)")]
    # the TrainingRuntime, the TrainJob (refused by the Trainer's webhook only for want of the
    # runtime, which a dry run does not store), the eval Job and its ConfigMap
    assert line.startswith("cluster (base): 4 objects sent") and "refused" not in out.stdout, out.stdout

    # the pods the Trainer would make (the runtime's template with the TrainJob's container) are
    # sent as a Pod too: a GPU request unequal to its limit passes the TrainJob's schema, not a Pod's
    doc = yaml.safe_load(Path("trainops.yaml").read_text())
    requests = {"spec": {"trainer": {"resourcesPerNode": {"requests": {"nvidia.com/gpu": "4"}}}}}
    doc["spec"]["patches"] = [{"target": {"kind": "TrainJob"}, "merge": requests}]
    Path("trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    out = run("validate", "--render", "--kubeconfig", str(sim.kubeconfig))
    assert out.code == 3, out.stdout + out.stderr
    (line,) = [line for line in out.stderr.splitlines() if "refuses the pods of TrainJob" in line]
    assert "from its runtime's node template" in line and "nvidia.com/gpu" in line, line


def test_train_watch_restarts_a_trainjob_away_from_a_lost_node_through_git(
    tmp_path: Path, git_remote: Path, sim: KubeCluster
) -> None:
    """A node of the run lost (its Node deleted): `train watch` requeues the run through git —
    the TrainJob and its TrainingRuntime pruned, then committed back with the node excluded —
    and the Trainer runs it again on the nodes left. (Last in the module: it takes a node.)"""
    from tests.faults import test_kube_watch as kw
    from trainops_testing.kube_jobs import priority_class
    from trainops_testing.services import LOOPBACK, free_port

    sim.api.apply(priority_class("research-normal", 1000))  # the example's, as an administrator made it
    path = write_variant(tmp_path / "proj", "kubeflow")
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["gitops"]["repo"] = f"file://{git_remote}"
    doc["spec"]["registry"] = f"file://{tmp_path / 'registry'}"
    doc["spec"]["train"]["faults"] = {"drainAfter": {"incidents": 10, "window": "1h"}}
    doc["spec"]["train"]["metricsAddress"] = f"{LOOPBACK}:{free_port()}"
    doc["spec"].pop("slo", None)  # no prometheus-operator CRDs on this cluster
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    project = path.parent
    try:
        with kw.GitOpsController(sim.kubeconfig, f"file://{git_remote}") as gitops:
            watcher = kw._start(sim, project, "w1")
            lost = sorted(kw._running_nodes(sim.api, "w1"))[0]
            sim.api.delete("v1", "Node", lost)
            kw._wait_recovered(project, "w1", watcher)
            after = kw._running_nodes(sim.api, "w1")
            report = kw._finish(sim, watcher, "w1")
            assert gitops.errors == [], sorted(set(gitops.errors))[:5]
        [incident] = kw._incidents(project, "w1")
        assert (incident.fault, incident.action, incident.node) == ("node-lost", "requeue", lost)
        assert lost not in after and len(after) == 2
        assert report["phase"] == "Completed" and report["restarts"][0]["excluded"] == [lost]
        # the runtime came back with the exclusion in its pod template
        shown = subprocess.run(
            ["git", "--git-dir", str(git_remote), "show", "main:clusters/dev/train/trainjob.yaml"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        runtime = next(d for d in yaml.safe_load_all(shown) if d and d["kind"] == "TrainingRuntime")
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [lost]} in terms[0]["matchExpressions"]
    finally:
        with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
            for job in cluster.list(TRAINER, "TrainJob", namespace=kw.NAMESPACE):
                cluster.delete(TRAINER, "TrainJob", job["metadata"]["name"], namespace=kw.NAMESPACE)
