"""`trainops train watch RUN` on the simulated cluster (etcd, kube-apiserver, the controller
manager, the default scheduler, kwok nodes; no Volcano or Kueue controller: the run is the
example's Kueue variant as a batch/v1 Job, which the Job controller runs by itself).

The GitOps controller is the stand-in of trainops.cluster.applier, syncing the GitOps path's
train/ directory in a loop (as Argo CD polls). A fault is injected the way the cluster would
report it, and the real CLI, in its own process, must detect it, act as the table says,
record the incident, and the run must run again on the nodes left:

- a GPU off the bus (an `NVRM: Xid 79` Warning event on a node of the run, as a GPU health
  agent writes it): drain — the node cordoned and tainted through the API server (the one
  write outside git), the job restarted through two commits away from it;
- a node lost (its Node object deleted): requeue — restarted through git, no node written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_json_convention import bad_keys
from tests.cli.test_train_cli import IMAGE, _git
from tests.cluster.targets import write_variant
from trainops import clock
from trainops.cluster import applier
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.cluster.nodes import FAULT_TAINT, REASON_ANNOTATION
from trainops.faults import incidents as records
from trainops.faults.ettr import phases as phases_of
from trainops.manifest import load_manifest
from trainops.registry.context import Registries
from trainops.render.kueue import TAS_REQUIRED
from trainops.render.names import LABEL_RUN_ID
from trainops_testing.kube_cluster import Shape
from trainops_testing.kube_jobs import finish_pods, priority_class
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "tiny-llm"
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")


@pytest.fixture(scope="module")
def cluster(kube_cluster_factory: Any) -> Iterator[Any]:
    # the run takes two nodes; each test takes one away
    started = kube_cluster_factory(shape=Shape(nodes=4, racks=1), components=COMPONENTS)
    started.api.apply(priority_class("research-normal", 1000))  # the example's, as an administrator made it
    yield started
    started.stop()


class GitOpsController:
    """The stand-in Argo CD: sync the path's train/ directory every 0.3 s, in a thread."""

    def __init__(self, kubeconfig: Path, repo: str) -> None:
        self.kubeconfig, self.repo = kubeconfig, repo
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        with connect(ClusterAccess(str(self.kubeconfig))) as api:
            while not self.stop.wait(0.3):
                try:
                    applier.sync(api, repo=self.repo, branch="main", path="clusters/dev/train")
                except Exception as err:  # the test reads them: a sync must not fail
                    self.errors.append(f"{type(err).__name__}: {err}")

    def __enter__(self) -> GitOpsController:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


@pytest.fixture
def project(tmp_path: Path, git_remote: Path, cluster: Any) -> Path:
    """The example's Kueue batch/v1 Job variant, its GitOps repo a bare repo, its registry a directory."""
    path = write_variant(tmp_path / "proj", "kueue-job")
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["gitops"]["repo"] = f"file://{git_remote}"
    doc["spec"]["registry"] = f"file://{tmp_path / 'registry'}"
    doc["spec"]["train"]["faults"] = {"drainAfter": {"incidents": 10, "window": "1h"}}
    # no SLOs: this cluster has no prometheus-operator CRDs for the run's PodMonitor and rules
    # (a restart keeping them is tests/faults/test_exclude.py's)
    doc["spec"].pop("slo", None)
    doc["spec"]["train"]["metricsAddress"] = f"{LOOPBACK}:{free_port()}"  # where `train watch` serves the run's
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path.parent


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainops.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=project,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        timeout=120,
        check=False,
    )


def _pods(api: Any, run_id: str) -> list[dict[str, Any]]:
    return [
        p
        for p in api.list("v1", "Pod", NAMESPACE, selector=f"{LABEL_RUN_ID}={run_id}")
        if not p["metadata"].get("deletionTimestamp")
    ]


def _running_nodes(api: Any, run_id: str) -> set[str]:
    return {p["spec"]["nodeName"] for p in _pods(api, run_id) if p.get("status", {}).get("phase") == "Running"}


class Watcher:
    """`trainops train watch RUN` in its own process; its stderr lines read as they come."""

    def __init__(self, cluster: Any, project: Path, run_id: str) -> None:
        watch = ["train", "watch", run_id, "--kubeconfig", str(cluster.kubeconfig), "--interval", "0.5"]
        limits = ["--prune-timeout", "60", "--timeout", "150", "-o", "json"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainops.cli.main", *watch, *limits],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=project,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def watching(self, nodes: set[str]) -> bool:
        """Has it said it watches the run on these nodes (it has looked once)?"""
        if self.proc.poll() is not None:
            raise AssertionError("train watch exited: " + "\n".join(self.lines))
        return any(line.endswith(f"on {', '.join(sorted(nodes))}") for line in self.lines)

    def stderr(self) -> str:
        self.reader.join(timeout=10)
        return "\n".join(self.lines)


def _start(cluster: Any, project: Path, run_id: str) -> Watcher:
    """Submit RUN, wait until its two pods run, start `train watch` on it and wait for its first look."""
    submitted = _cli(project, "train", "submit", "--image", IMAGE, "--run-id", run_id)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: len(_running_nodes(cluster.api, run_id)) == 2, timeout=60, what=f"run {run_id} running")
    watcher = Watcher(cluster, project, run_id)
    nodes = _running_nodes(cluster.api, run_id)
    wait_for(lambda: watcher.watching(nodes), timeout=60, what="train watch looking at the run")
    return watcher


def _jobs(api: Any, run_id: str) -> list[dict[str, Any]]:
    return [j for j in api.list("batch/v1", "Job", NAMESPACE, selector=f"{LABEL_RUN_ID}={run_id}")
            if not j["metadata"].get("deletionTimestamp")]  # fmt: skip


def _tas_level(job: dict[str, Any]) -> str:
    return str(job["spec"]["template"]["metadata"]["annotations"][TAS_REQUIRED])


def _incidents(project: Path, run_id: str) -> list[records.Incident]:
    manifest = load_manifest(project / "trainops.yaml")
    with Registries.for_manifest(manifest) as registries:
        repository = records.incidents_repository(
            registries, registry=manifest.pipeline.spec.registry, pipeline=manifest.pipeline.metadata.name
        )
        return records.list_incidents(registries, repository=repository, run_id=run_id)


def _wait_recovered(project: Path, run_id: str, watcher: Watcher) -> None:
    def recovered() -> bool:
        found = _incidents(project, run_id)
        return bool(found) and all(i.recovered for i in found)

    try:
        wait_for(recovered, timeout=120, what="the incident recorded and the run running again")
    except ServiceError as err:
        watcher.proc.kill()
        raise AssertionError(f"{err}; train watch said: {watcher.stderr()[-3000:]}") from None


def _finish(cluster: Any, watcher: Watcher, run_id: str) -> dict[str, Any]:
    """Once the run runs again: its pods exit 0, the job completes, the watch ends; its report."""
    finish_pods(cluster.api, NAMESPACE, f"{LABEL_RUN_ID}={run_id}", code=0)
    assert watcher.proc.stdout is not None
    out = watcher.proc.stdout.read()
    assert watcher.proc.wait(timeout=120) == 0, watcher.stderr()
    report: dict[str, Any] = json.loads(out)
    assert list(bad_keys(report)) == []  # the JSON convention (tests/cli/test_json_convention.py)
    return report


def _xid_event(node: str, xid: int) -> dict[str, Any]:
    now = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.xid-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "reason": "GPUXid",
        "type": "Warning",
        "source": {"component": "gpu-health-agent", "host": node},
        "message": f"NVRM: Xid (PCI:0000:3b:00): {xid}, pid=0, name=python, Ch 00000000",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def test_a_gpu_off_the_bus_cordons_the_node_and_restarts_the_run_elsewhere_through_git(
    cluster: Any, project: Path, git_remote: Path
) -> None:
    with GitOpsController(cluster.kubeconfig, f"file://{git_remote}") as gitops:
        watcher = _start(cluster, project, "x1")
        before = _running_nodes(cluster.api, "x1")
        broken = sorted(before)[0]
        commits = int(_git(git_remote, "rev-list", "--count", "main"))
        cluster.api.create(_xid_event(broken, 79))
        injected = clock.now()
        _wait_recovered(project, "x1", watcher)
        after = _running_nodes(cluster.api, "x1")
        report = _finish(cluster, watcher, "x1")
        assert gitops.errors == []

    [incident] = _incidents(project, "x1")
    assert (incident.fault, incident.action, incident.node) == ("fell-off-bus", "drain", broken)
    assert incident.detail == "Xid 79: the GPU has fallen off the bus"
    assert (clock.parse(incident.detected) - injected).total_seconds() < 5
    assert f"cordoned {broken} and tainted it {FAULT_TAINT}=fell-off-bus:NoSchedule" in incident.action_note
    # the node: cordoned, tainted, the reason on it; no other node touched
    node = cluster.api.get("v1", "Node", broken)
    assert node["spec"]["unschedulable"] is True
    assert {"key": FAULT_TAINT, "value": "fell-off-bus", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert "Xid 79" in node["metadata"]["annotations"][REASON_ANNOTATION]
    for other in set(cluster.nodes) - {broken}:
        assert not cluster.api.get("v1", "Node", other)["spec"].get("unschedulable")
    # the run runs again, on two nodes, none of them the broken one
    assert broken not in after and len(after) == 2
    # two commits: the job removed, then back with the node excluded, the incident named
    assert int(_git(git_remote, "rev-list", "--count", "main")) == commits + 2
    message = _git(git_remote, "log", "-1", "--format=%B", "main")
    assert "Trainops-Action: restart" in message and f"Trainops-Incident: {incident.id}" in message
    job = next(
        d
        for d in yaml.safe_load_all(_git(git_remote, "show", "main:clusters/dev/train/kueue-job.yaml"))
        if d and d["kind"] == "Job"
    )
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [broken]} in terms["nodeSelectorTerms"][0][
        "matchExpressions"
    ]
    assert report["phase"] == "Completed" and [i["id"] for i in report["incidents"]] == [incident.id]
    assert report["cordoned"][0]["node"] == broken


def _pushed_checkpoint(project: Path, run_id: str, step: int) -> None:
    """A checkpoint of the run in the registry, as its pods' sidecar pushes one."""
    directory = project / "ckpt" / f"step-{step:06d}"
    directory.mkdir(parents=True)
    (directory / "trainer_state.json").write_text(json.dumps({"step": step, "metrics": {"train_loss": 0.5}}))
    pushed = _cli(project, "ckpt", "watch", str(directory.parent), "--run-id", run_id, "--once")
    assert pushed.returncode == 0, pushed.stderr


def _value(prometheus: Prometheus, query: str) -> float | None:
    result = prometheus.query(query)
    return float(result[0]["value"][1]) if result else None


def test_a_lost_node_restarts_the_run_elsewhere_through_git_without_writing_to_a_node(
    cluster: Any, project: Path, git_remote: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    address = load_manifest(project / "trainops.yaml").require_train().metrics_address
    assert address is not None
    prometheus = Prometheus(tmp_path / "prom", targets={"train": [address]}, rules={"groups": []},
                                alertmanager=None)  # fmt: skip
    request.addfinalizer(prometheus.stop)
    prometheus.start()
    _pushed_checkpoint(project, "x2", 40)
    with GitOpsController(cluster.kubeconfig, f"file://{git_remote}") as gitops:
        watcher = _start(cluster, project, "x2")
        run = 'run="x2",pipeline="tiny-llm"'
        # what `train watch` serves (the supervisor's series), scraped by a real Prometheus
        wait_for(lambda: _value(prometheus, f"trainops_train_step{{{run}}}") == 40, timeout=60,
                 what="the watch's metrics scraped")  # fmt: skip
        assert _value(prometheus, f"trainops_train_restarts_total{{{run}}}") == 0
        lost = sorted(_running_nodes(cluster.api, "x2"))[0]
        cordoned_before = {
            n["metadata"]["name"] for n in cluster.api.list("v1", "Node") if n["spec"].get("unschedulable")
        }
        [job_before] = _jobs(cluster.api, "x2")
        cluster.api.delete("v1", "Node", lost)
        injected = clock.now()
        _wait_recovered(project, "x2", watcher)
        after = _running_nodes(cluster.api, "x2")
        [job_after] = _jobs(cluster.api, "x2")
        report = _finish(cluster, watcher, "x2")
        assert gitops.errors == []

    [incident] = _incidents(project, "x2")
    assert (incident.fault, incident.action, incident.node, incident.source) == (
        "node-lost",
        "requeue",
        lost,
        "cluster",
    )
    assert (clock.parse(incident.detected) - injected).total_seconds() < 5
    assert "cordoned" not in incident.action_note and "restarted through git away from" in incident.action_note
    assert lost not in after and len(after) == 2
    # the job put back through git is a new object with the same Kueue TAS level (one rack) as the
    # one the run ran as: the restart keeps the run's topology constraint
    assert job_after["metadata"]["uid"] != job_before["metadata"]["uid"]
    assert _tas_level(job_after) == _tas_level(job_before) == "topology.trainops.dev/rack"
    # MTTR in phases: the pod running again is all the watch sees, so no restore nor first step
    assert incident.acted is not None and incident.restarted == incident.recovered
    phases = phases_of(incident)
    assert phases is not None and (phases.restore_seconds, phases.first_step_seconds) == (None, None)
    known = [phases.detect_seconds, phases.decide_seconds, phases.reschedule_seconds]
    assert all(v is not None for v in known) and incident.mttr_seconds is not None, phases
    assert abs(sum(v for v in known if v is not None) - incident.mttr_seconds) < 0.01, phases
    # the watch has ended: its last values (the run's series went stale with it)
    assert _value(prometheus, f"last_over_time(trainops_train_loss{{{run}}}[5m])") == 0.5
    age = _value(prometheus, f"last_over_time(trainops_train_checkpoint_age_seconds{{{run}}}[5m])")
    assert age is not None and age < 300, age
    # the restart through git counted; ETTR so far: the time from the loss to the pods running again lost
    assert _value(prometheus, f"max_over_time(trainops_train_restarts_total{{{run}}}[5m])") == 1
    ettr = _value(prometheus, f"min_over_time(trainops_train_ettr{{{run}}}[5m])")
    assert ettr is not None and 0 < ettr < 1, ettr
    # kwok's nodes keep no container logs: said once per pod, the checkpoints stood in
    assert "cannot read the log of pod" in watcher.stderr()
    assert report["warnings"] and all("cannot read the log of pod" in w for w in report["warnings"])
    cordoned = {n["metadata"]["name"] for n in cluster.api.list("v1", "Node") if n["spec"].get("unschedulable")}
    assert cordoned == cordoned_before  # a requeue writes to no node
    assert report["restarts"][0]["excluded"] == [lost]


def _cordon(api: Any, node: str, cordoned: bool) -> None:
    spec: dict[str, Any] = {"unschedulable": cordoned}
    if not cordoned:
        spec["taints"] = None  # a drained node of an earlier test is uncordoned and untainted too
    api.merge_patch("v1", "Node", node, {"spec": spec})


def test_a_restart_that_leaves_the_run_nowhere_to_go_is_an_incident_of_its_own(
    cluster: Any, project: Path, git_remote: Path
) -> None:
    """The run's node is lost and every other node is cordoned: restarted away from it, the
    pods cannot be scheduled — an `unschedulable` incident, shown by `train status`, closed
    once a node is free again."""
    with GitOpsController(cluster.kubeconfig, f"file://{git_remote}") as gitops:
        watcher = _start(cluster, project, "x3")
        running = _running_nodes(cluster.api, "x3")
        others = [n["metadata"]["name"] for n in cluster.api.list("v1", "Node")
                  if n["metadata"]["name"] not in running]  # fmt: skip
        for node in others:
            _cordon(cluster.api, node, True)
        lost = sorted(running)[0]
        cluster.api.delete("v1", "Node", lost)

        def stuck() -> list[records.Incident]:
            return [i for i in _incidents(project, "x3") if i.fault == "unschedulable"]

        try:
            wait_for(lambda: bool(stuck()), timeout=120, what="the unschedulable incident")
        except ServiceError as err:
            watcher.proc.kill()
            raise AssertionError(f"{err}; train watch said: {watcher.stderr()[-3000:]}") from None
        [incident] = stuck()
        assert (incident.action, incident.source, incident.bucket) == ("stop", "cluster", "drain-service")
        assert f"restarted away from {lost}" in incident.detail and incident.recovered is None
        assert all("PodScheduled=False Unschedulable:" in line for line in incident.evidence), incident.evidence
        status = _cli(project, "train", "status", "x3", "--kubeconfig", str(cluster.kubeconfig))
        assert status.returncode == 0, status.stderr
        assert f"  blocked {incident.detail} (incident {incident.id})" in status.stdout, status.stdout
        for node in others:  # a node is free again: the pods run, the incident is closed
            _cordon(cluster.api, node, False)
        wait_for(lambda: stuck()[0].recovered is not None, timeout=120, what="the unschedulable incident closed")
        # closed by the pods placed after it was seen, not by one that had kept running meanwhile
        # (on the node left, or on the lost one until the pod GC removes it)
        [closed] = stuck()
        assert closed.recovered is not None and clock.parse(closed.recovered) >= clock.parse(closed.detected), closed
        report = _finish(cluster, watcher, "x3")
        assert gitops.errors == []
    assert [i["fault"] for i in report["incidents"]] == ["node-lost", "unschedulable"]
    status = _cli(project, "train", "status", "x3", "--kubeconfig", str(cluster.kubeconfig))
    assert "blocked" not in status.stdout, status.stdout
