"""The failure policy trainops renders for a JobSet (train.faultTolerance), carried out by the
real JobSet and Job controllers: maxRetry is the number of restarts (JobSet's maxRestarts,
as on Slurm and Volcano), and the action picks what restarts — the whole gang (RestartJob)
or only the failed child Job (RestartTask, behind the JobSet controller's RestartJob feature
gate: `validate --kubeconfig` says so on a cluster without it). kwok stands for the kubelet: a pod "exits" when
the test tells kwok its exit code. No Kueue here: the JobSet runs as soon as it is applied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.cluster.access import ClusterAccess
from trainops.cluster.dryrun import check_against_cluster
from trainops.train.kube_jobs import job_restarts
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.kube_jobs import (
    apply,
    delete_all,
    fail_pod,
    live_pods,
    priority_class,
    render_job,
    running_again,
)
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "jobset")
# RestartTask renders JobSet's RestartJob action, behind the controller's RestartJob gate
CLUSTER_OPTIONS = {"jobset_gates": {"RestartJob": True}}
JOBSET = "jobset.x-k8s.io/v1alpha2"
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _submit(sim: KubeCluster, tmp_path: Path, ns: str, policy: dict[str, Any]) -> str:
    objects = render_job(
        tmp_path / ns,
        run_id=ns,
        scheduler="kueue",
        namespace=ns,
        queue=ns,
        nodes=3,
        topology=None,
        faultTolerance=policy,
    )
    apply(sim.api, [priority_class("research-normal", 1000)])  # the example's train.priorityClass
    apply(sim.api, objects)
    (jobset,) = [o["metadata"]["name"] for o in objects if o["kind"] == "JobSet"]
    return str(jobset)


def _status(sim: KubeCluster, ns: str, name: str) -> dict[str, Any]:
    return dict(sim.api.get(JOBSET, "JobSet", name, ns).get("status") or {})


def _failed(sim: KubeCluster, ns: str, name: str) -> bool:
    conditions = _status(sim, ns, name).get("conditions", [])
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)


def test_a_failed_pod_restarts_the_whole_gang_max_retry_times_then_the_jobset_fails(
    sim: KubeCluster, tmp_path: Path
) -> None:
    ns = "js-gang"
    name = _submit(sim, tmp_path, ns, {"maxRetry": 2, "action": "RestartJob"})
    selector = f"{NAME_LABEL}={name}"
    try:
        wait_for(lambda: running_again(sim.api, ns, selector, 3, old=set()), timeout=90, what="3 pods running")
        for attempt in (1, 2):
            before = live_pods(sim.api, ns, selector)
            fail_pod(sim.api, ns, before[-1])  # a worker
            # every Job is recreated: the leader too, so all ranks restart from one checkpoint
            wait_for(
                lambda old={p["metadata"]["uid"] for p in before}: running_again(sim.api, ns, selector, 3, old=old),
                timeout=90,
                what=f"{ns}/{name}: the whole gang recreated and running ({attempt})",
                interval=0.2,
            )
            assert _status(sim, ns, name).get("restarts") == attempt
            assert job_restarts(sim.api.get(JOBSET, "JobSet", name, ns)) == attempt  # what `train status` says
            assert not _failed(sim, ns, name)
        # the third failure is past maxRetry: the JobSet fails instead of restarting
        fail_pod(sim.api, ns, live_pods(sim.api, ns, selector)[0])
        wait_for(lambda: _failed(sim, ns, name), timeout=60, what=f"{ns}/{name} Failed after maxRetry", interval=0.2)
        assert _status(sim, ns, name).get("restarts") == 2
    finally:
        delete_all(sim.api, ns, JOBSET, "JobSet")


def test_restart_task_recreates_only_the_failed_child_job(sim: KubeCluster, tmp_path: Path) -> None:
    ns = "js-task"
    name = _submit(sim, tmp_path, ns, {"maxRetry": 1, "action": "RestartTask"})
    selector = f"{NAME_LABEL}={name}"
    workers = f"{selector},{RJOB_LABEL}=workers"
    try:
        wait_for(lambda: running_again(sim.api, ns, selector, 3, old=set()), timeout=90, what="3 pods running")
        (leader,) = live_pods(sim.api, ns, f"{selector},{RJOB_LABEL}=leader")
        old_workers = live_pods(sim.api, ns, workers)
        fail_pod(sim.api, ns, old_workers[0])
        wait_for(
            lambda: running_again(sim.api, ns, workers, 2, old={p["metadata"]["uid"] for p in old_workers}),
            timeout=90,
            what=f"{ns}/{name}: the workers Job recreated and running",
            interval=0.2,
        )
        (still,) = live_pods(sim.api, ns, f"{selector},{RJOB_LABEL}=leader")
        assert still["metadata"]["uid"] == leader["metadata"]["uid"]  # the leader's Job was left alone
        # a restart of one child Job is counted for it (toward maxRestarts), not for the JobSet
        (counted,) = [r for r in _status(sim, ns, name)["replicatedJobsStatus"] if r["name"] == "workers"]
        assert counted["jobRestartsCountTowardsMax"] == [1]
        assert job_restarts(sim.api.get(JOBSET, "JobSet", name, ns)) == 1  # what `train status` says
        fail_pod(sim.api, ns, live_pods(sim.api, ns, workers)[0])
        wait_for(lambda: _failed(sim, ns, name), timeout=60, what=f"{ns}/{name} Failed after maxRetry", interval=0.2)
    finally:
        delete_all(sim.api, ns, JOBSET, "JobSet")


def test_validate_says_which_gate_a_cluster_without_restart_job_lacks(
    kube_cluster_factory: Callable[..., KubeCluster], tmp_path: Path
) -> None:
    """The same render on a JobSet controller without its RestartJob gate: its webhook refuses
    the rule; `validate --kubeconfig` puts that at train.faultTolerance with what to do."""
    bare = kube_cluster_factory(shape=Shape(nodes=1, racks=1), components=("etcd", "apiserver", "jobset"))
    try:
        bare.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "js-nogate"}})
        render_job(
            tmp_path,
            run_id="nogate",
            scheduler="kueue",
            namespace="js-nogate",
            queue="js-nogate",
            nodes=2,
            topology=None,
            faultTolerance={"maxRetry": 1, "action": "RestartTask"},
        )
        (check,) = check_against_cluster(
            tmp_path / "trainops.yaml", targets=["sim"], access=ClusterAccess(str(bare.kubeconfig))
        )
        (problem,) = [p for p in check.problems if p.path.startswith("spec.train.faultTolerance")]
        assert "RestartJob feature gate is disabled" in problem.message
        assert "featureGates: {RestartJob: true}" in problem.message
        assert not bare.api.list(JOBSET, "JobSet", "js-nogate")  # a dry run: nothing stored
    finally:
        bare.stop()
