"""What trainops renders for Kueue (JobSet + ClusterQueue/LocalQueue), run by the real Kueue,
JobSet and Job controllers and placed by the default scheduler on kwok nodes.

The cluster (tests/kube/conftest.py) has 8 kwok nodes × 8 GPUs in 2 racks of 4.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.cluster.access import ClusterAccess
from trainops.cluster.dryrun import check_against_cluster
from trainops_testing.cli import run
from trainops_testing.kube_cluster import POOL_LABEL, RACK_LABEL, SPINE_LABEL, KubeApi, KubeCluster, Shape
from trainops_testing.kube_jobs import apply, finish_pods, priority_class, racks_of, render_job, render_tenants
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=8, racks=2, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "jobset", "kueue")
JOBSET = "jobset.x-k8s.io/v1alpha2"
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture(autouse=True)
def _no_jobsets_left(sim: KubeCluster) -> Iterator[None]:
    """The module's cluster is shared: each test's JobSets go, with their pods, after it."""
    yield
    for jobset in sim.api.list(JOBSET, "JobSet"):
        meta = jobset["metadata"]
        sim.api.delete(JOBSET, "JobSet", meta["name"], meta["namespace"])
    wait_for(
        lambda: not sim.api.list("v1", "Pod", selector="jobset.sigs.k8s.io/jobset-name"),
        timeout=60,
        what="the JobSets' pods deleted",
    )


def _tenant(name: str, *, nominal: int, capability: int | None = None, cohort: str | None = None) -> dict[str, Any]:
    gpus: dict[str, Any] = {"deserved": nominal}
    if capability is not None:
        gpus["capability"] = capability
    # Kueue admits only what a ClusterQueue covers: CPU and memory have quotas too (ample: the
    # GPUs are what is rationed); the cluster's Kueue leaves rdma/ to the device plugin
    plenty = {"deserved": "4096", "capability": "4096"}
    tenant: dict[str, Any] = {
        "name": name,
        "namespaces": [name],
        "gpus": gpus,
        "cpu": plenty,
        "memory": {"deserved": "64Ti", "capability": "64Ti"},
        "weight": 1,
    }
    if cohort:
        tenant["cohort"] = cohort
    return tenant


def _setup(
    sim: KubeCluster, tmp_path: Path, ns: str, tenants: list[dict[str, Any]], cluster: dict[str, Any] | None = None
) -> None:
    rendered = render_tenants(
        tmp_path / "t", scheduler="kueue", namespace=ns, queue=ns, tenants=tenants, cluster=cluster
    )
    apply(sim.api, rendered)
    # the example's train.priorityClass, as the cluster's administrator defines it: Kueue takes
    # the Workload's priority from the pods' PriorityClass
    apply(sim.api, [priority_class("research-normal", 1000)])


def _submit(
    sim: KubeCluster, tmp_path: Path, run_id: str, ns: str, nodes: int, cluster: dict[str, Any] | None = None
) -> str:
    # with a cluster topology, tiny-llm's own (hard, highestTierAllowed 1: the rack label)
    topology: dict[str, Any] = {} if cluster else {"topology": None}
    objects = render_job(
        tmp_path / run_id,
        run_id=run_id,
        scheduler="kueue",
        namespace=ns,
        queue=ns,
        nodes=nodes,
        cluster=cluster,
        **topology,
    )
    apply(sim.api, objects)
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    return str(jobset["metadata"]["name"])


def _workload(api: KubeApi, ns: str, jobset: str) -> dict[str, Any]:
    for wl in api.list(KUEUE, "Workload", ns):
        if any(o.get("name") == jobset for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    raise AssertionError(f"no Workload for JobSet {ns}/{jobset}")


def _condition(wl: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in wl.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return dict(cond)
    return {}


def _admitted(api: KubeApi, ns: str, jobset: str) -> bool:
    return _condition(_workload(api, ns, jobset), "Admitted").get("status") == "True"


def _suspended(api: KubeApi, ns: str, jobset: str) -> bool:
    return bool(api.get(JOBSET, "JobSet", jobset, ns)["spec"].get("suspend"))


def _bound(api: KubeApi, ns: str, jobset: str) -> list[str]:
    pods = api.list("v1", "Pod", ns, selector=f"jobset.sigs.k8s.io/jobset-name={jobset}")
    return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"]


def test_kueue_admits_within_nominal_quota_and_holds_the_next_until_the_first_finishes(
    sim: KubeCluster, tmp_path: Path
) -> None:
    ns = "kq"
    _setup(sim, tmp_path, ns, [_tenant(ns, nominal=16)])
    first = _submit(sim, tmp_path, "first", ns, nodes=2)  # 16 GPUs: the whole nominal quota
    wait_for(lambda: _admitted(sim.api, ns, first), timeout=60, what="first JobSet admitted")
    wait_for(lambda: len(_bound(sim.api, ns, first)) == 2, timeout=60, what="first JobSet's 2 pods running")
    second = _submit(sim, tmp_path, "second", ns, nodes=2)
    wait_for(
        lambda: bool(_condition(_workload(sim.api, ns, second), "QuotaReserved")),
        timeout=60,
        what="second Workload evaluated",
    )
    held = _condition(_workload(sim.api, ns, second), "QuotaReserved")
    assert held["status"] == "False", held
    assert "quota" in held["message"].lower(), held
    assert _suspended(sim.api, ns, second)
    assert not _bound(sim.api, ns, second)
    assert _workload(sim.api, ns, first)["spec"]["priority"] == 1000  # the pods' PriorityClass
    status = run(*_status(sim, tmp_path / "second", "second"))  # what Kueue recorded: no quota
    assert status.code == 0, status.stderr
    reason = next(line for line in status.stdout.splitlines() if line.startswith("  reason "))
    assert reason.startswith("  reason Workload ") and f"QuotaReserved: Pending: {held['message']}" in reason
    # kwok ends the first job's pods (exit 0): the JobSet completes, Kueue admits the second
    assert finish_pods(sim.api, ns, f"jobset.sigs.k8s.io/jobset-name={first}") == 2
    wait_for(lambda: _admitted(sim.api, ns, second), timeout=90, what="second JobSet admitted after the first")
    wait_for(lambda: len(_bound(sim.api, ns, second)) == 2, timeout=60, what="second JobSet's pods running")


def _status(sim: KubeCluster, directory: Path, run_id: str) -> list[str]:
    """`train status RUN` of a job render_job rendered in ``directory``."""
    manifest = directory / "trainops.yaml"
    return ["train", "status", run_id, "-f", str(manifest), "--env", "sim", "--kubeconfig", str(sim.kubeconfig)]


def test_a_priority_class_the_cluster_lacks_is_reported_and_the_waiting_job_says_why(
    sim: KubeCluster, tmp_path: Path
) -> None:
    """Kueue makes no Workload for a job whose pods name a PriorityClass the cluster lacks, and
    records nothing about it in the API: `validate --kubeconfig` reports the class, `train
    status` names it as the reason; once the class exists, Kueue admits the job at its priority."""
    ns, missing = "kprio", "kq-not-yet"
    _setup(sim, tmp_path, ns, [_tenant(ns, nominal=16)])
    train = {"scheduler": "kueue", "namespace": ns, "queue": ns, "nodes": 1, "topology": None}
    objects = render_job(tmp_path / "waits", run_id="waits", priorityClass=missing, **train)
    path = tmp_path / "waits" / "trainops.yaml"
    (check,) = check_against_cluster(path, targets=["sim"], access=ClusterAccess(str(sim.kubeconfig)))
    (problem,) = [p for p in check.problems if p.path == "spec.train.priorityClass"]
    assert problem.message == (
        f"the cluster has no PriorityClass {missing} (scheduling.k8s.io/v1), so Kueue makes no Workload for the "
        "job, which stays suspended: have it created (a cluster-wide object, an administrator's), or name one "
        "the cluster has"
    )
    apply(sim.api, objects)
    (jobset,) = [o["metadata"]["name"] for o in objects if o["kind"] == "JobSet"]
    wait_for(lambda: _suspended(sim.api, ns, jobset), timeout=30, what="the JobSet suspended by Kueue's webhook")
    status = run(*_status(sim, tmp_path / "waits", "waits"))
    assert status.code == 0, status.stderr
    assert status.stdout.splitlines()[:2] == [
        f"waits  JobSet {ns}/{jobset}  Suspended  restarts 0",
        f"  reason no Kueue Workload: Kueue makes none while the cluster lacks the PriorityClass {missing} it names",
    ]
    assert not sim.api.list(KUEUE, "Workload", ns)
    apply(sim.api, [priority_class(missing, 500)])
    try:
        (check,) = check_against_cluster(path, targets=["sim"], access=ClusterAccess(str(sim.kubeconfig)))
        assert not [p for p in check.problems if p.path == "spec.train.priorityClass"]
        wait_for(lambda: _admitted(sim.api, ns, jobset), timeout=90, what="the JobSet admitted once its class exists")
        assert _workload(sim.api, ns, jobset)["spec"]["priority"] == 500
    finally:
        sim.api.delete("scheduling.k8s.io/v1", "PriorityClass", missing)


def test_kueue_borrows_within_its_cohort_up_to_capability(sim: KubeCluster, tmp_path: Path) -> None:
    lender, borrower = "lend", "borrow"
    tenants = [_tenant(borrower, nominal=16, capability=32, cohort="pool"), _tenant(lender, nominal=32, cohort="pool")]
    _setup(sim, tmp_path, borrower, tenants)
    big = _submit(sim, tmp_path, "big", borrower, nodes=4)  # 32 GPUs: 16 nominal + 16 borrowed
    wait_for(lambda: _admitted(sim.api, borrower, big), timeout=60, what="borrowing JobSet admitted")
    wait_for(lambda: len(_bound(sim.api, borrower, big)) == 4, timeout=60, what="borrowing JobSet's pods running")
    over = _submit(sim, tmp_path, "over", borrower, nodes=1)  # past capability: held
    wait_for(
        lambda: bool(_condition(_workload(sim.api, borrower, over), "QuotaReserved")),
        timeout=60,
        what="Workload past the borrowing limit evaluated",
    )
    assert _condition(_workload(sim.api, borrower, over), "QuotaReserved")["status"] == "False"


FABRIC: dict[str, Any] = {
    "topology": {
        "name": "gpu-fabric",
        "nodeLabels": {POOL_LABEL: "gpu"},
        "tiers": [{"name": "rack", "nodeLabel": RACK_LABEL}, {"name": "spine", "nodeLabel": SPINE_LABEL}],
        "domains": {"spine-0": {"rack-0": {}, "rack-1": {}}},
    }
}


def test_kueue_topology_aware_scheduling_keeps_a_job_inside_one_rack(sim: KubeCluster, tmp_path: Path) -> None:
    ns = "tas"
    _setup(sim, tmp_path, ns, [_tenant(ns, nominal=64)], cluster=FABRIC)
    small = _submit(sim, tmp_path, "one", ns, nodes=1, cluster=FABRIC)
    wait_for(lambda: len(_bound(sim.api, ns, small)) == 1, timeout=90, what="one-node JobSet running")
    (taken,) = _bound(sim.api, ns, small)
    big = _submit(sim, tmp_path, "four", ns, nodes=4, cluster=FABRIC)  # 32 GPUs: a whole rack
    wait_for(lambda: len(_bound(sim.api, ns, big)) == 4, timeout=90, what="4-node JobSet running")
    nodes = _bound(sim.api, ns, big)
    assert len(set(nodes)) == 4
    racks = racks_of(sim, nodes)
    assert len(racks) == 1 and racks != racks_of(sim, [taken]), (nodes, taken)
    assert _condition(_workload(sim.api, ns, big), "Admitted")["status"] == "True"


def test_a_tenant_without_a_cpu_quota_holds_the_job_as_trainops_warns(sim: KubeCluster, tmp_path: Path) -> None:
    """What tenants.uncovered warns of: a ClusterQueue covering only GPUs never admits a job
    that also requests CPU and memory (Kueue's default quotaCheckStrategy, BlockUndeclared)."""
    ns = "gpuonly"
    tenant = {"name": ns, "namespaces": [ns], "gpus": {"deserved": 64}, "weight": 1}
    _setup(sim, tmp_path, ns, [tenant])
    job = _submit(sim, tmp_path, "held", ns, nodes=1)
    wait_for(
        lambda: bool(_condition(_workload(sim.api, ns, job), "QuotaReserved")),
        timeout=60,
        what="the Workload evaluated",
    )
    held = _condition(_workload(sim.api, ns, job), "QuotaReserved")
    # Kueue names the first resource it cannot place (memory here; cpu is uncovered too)
    assert held["status"] == "False", held
    assert held["message"] == "couldn't assign flavors to pod set leader: resource memory unavailable in ClusterQueue"
    assert _suspended(sim.api, ns, job) and not _bound(sim.api, ns, job)


def test_kueue_reads_the_metrics_certificate_of_its_own_cluster(sim: KubeCluster) -> None:
    """Kueue v0.19.2 reads its metrics certificate from the fixed /etc/kueue/metrics/certs:
    each cluster's Kueue sees its own copy there, bind-mounted in a mount namespace of its own
    (where the machine allows one; else the shared path holds the latest cluster's copy)."""
    from trainops_testing.kube_addons import KUEUE_METRICS_CERTS, _mount_namespaces

    (kueue,) = [p for p in sim.procs if p.name == "kueue"]
    own = sim.directory / "kueue-metrics-certs"
    assert (own / "tls.crt").read_bytes() == (sim.pki / "webhook.crt").read_bytes()
    mounts = [line.split() for line in Path(f"/proc/{kueue.pid}/mountinfo").read_text().splitlines()]
    here = [m for m in mounts if m[4] == KUEUE_METRICS_CERTS]
    if _mount_namespaces():
        # the bind's root is our directory (relative to its filesystem: compare the tail)
        assert len(here) == 1 and here[0][3].endswith("/".join(own.parts[-3:])), here
        host = Path(f"/proc/{os.getpid()}/mountinfo").read_text()
        assert f" {KUEUE_METRICS_CERTS} " not in host  # not mounted for anyone else
    else:
        assert here == [] and (Path(KUEUE_METRICS_CERTS) / "tls.crt").is_file()


def test_each_pod_restores_its_own_node_share(sim: KubeCluster, tmp_path: Path) -> None:
    """The restore step's node rank: 0 on the leader, 1 + JOB_COMPLETION_INDEX (the Job
    controller's, in the init containers of the workers' Indexed Job) on each worker."""
    ns = "shares"
    _setup(sim, tmp_path, ns, [_tenant(ns, nominal=24)])
    jobset = _submit(sim, tmp_path, "shares", ns, nodes=3)
    wait_for(lambda: len(_bound(sim.api, ns, jobset)) == 3, timeout=60, what="the JobSet's 3 pods running")
    ranks = []
    for pod in sim.api.list("v1", "Pod", ns, selector=f"jobset.sigs.k8s.io/jobset-name={jobset}"):
        (restore,) = [c for c in pod["spec"]["initContainers"] if c["name"] == "ckpt-restore"]
        node_rank = restore["command"][restore["command"].index("--node-rank") + 1]
        if node_rank.isdigit():
            ranks.append(int(node_rank))
            continue
        assert node_rank == "auto+1"
        (index,) = [e for e in restore["env"] if e["name"] == "JOB_COMPLETION_INDEX"]
        path = index["valueFrom"]["fieldRef"]["fieldPath"]  # the pod's completion-index annotation
        key = path.split("['", 1)[1].rstrip("']")
        ranks.append(int(pod["metadata"]["annotations"][key]) + 1)
    assert sorted(ranks) == [0, 1, 2]
