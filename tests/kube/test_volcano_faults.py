"""The fault policies trainops renders for Volcano (train.faultTolerance), carried out by the
real Volcano controller: a failed pod restarts the whole gang, maxRetry times (trainops counts
restarts, as on Slurm; Volcano's maxRetry counts the failing attempt too, so the render adds
one), and the next failure fails the job. kwok stands for the kubelet: a pod "exits" when
the test tells kwok its exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops_testing.kube_cluster import EXIT_ANNOTATION, KubeCluster, Shape
from trainops_testing.kube_jobs import (
    JOB_NAME_LABEL,
    apply,
    delete_all,
    priority_class,
    render_job,
    render_tenants,
    wait_bound,
)
from trainops_testing.services import wait_for

SHAPE = Shape(nodes=4, racks=1, spines=1)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "kwok", "volcano")
VJOB = "batch.volcano.sh/v1alpha1"


def _pods(sim: KubeCluster, ns: str, job: str) -> list[dict[str, Any]]:
    pods = sim.api.list("v1", "Pod", ns, selector=f"{JOB_NAME_LABEL}={job}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _fail_one_pod(sim: KubeCluster, ns: str, job: str) -> None:
    """kwok ends one of the job's running pods with exit code 1 (its container "crashed")."""
    pod = sorted(_pods(sim, ns, job), key=lambda p: p["metadata"]["name"])[0]
    patch = {"metadata": {"annotations": {EXIT_ANNOTATION: "1"}}}
    sim.api.merge_patch("v1", "Pod", pod["metadata"]["name"], patch, ns)


def _job_status(sim: KubeCluster, ns: str, job: str) -> dict[str, Any]:
    return dict(sim.api.get(VJOB, "Job", job, ns).get("status") or {})


def test_a_failed_pod_restarts_the_whole_gang_up_to_max_retry_then_the_job_fails(
    sim: KubeCluster, tmp_path: Path
) -> None:
    ns = "retry"
    gpus = {"capability": 32, "deserved": 32}
    apply(
        sim.api,
        render_tenants(
            tmp_path / "t",
            namespace=ns,
            queue=ns,
            tenants=[{"name": ns, "namespaces": [ns], "gpus": gpus, "weight": 1}],
        ),
    )
    apply(sim.api, [priority_class("research-normal", 1000)])
    policy = {"maxRetry": 2, "restartOn": ["PodFailed"], "action": "RestartJob"}
    objects = render_job(
        tmp_path / "job", run_id="retry", namespace=ns, queue=ns, nodes=2, topology=None, faultTolerance=policy
    )
    (job,) = [o["metadata"]["name"] for o in objects if o["kind"] == "Job" and o["apiVersion"] == VJOB]
    (rendered,) = [o for o in objects if o["kind"] == "Job" and o["apiVersion"] == VJOB]
    assert rendered["spec"]["maxRetry"] == 3  # Volcano counts the attempt that fails the job
    apply(sim.api, objects)
    try:
        wait_bound(sim.api, ns, job, 2)
        for attempt in (1, 2):
            before = {p["metadata"]["uid"] for p in _pods(sim, ns, job)}
            _fail_one_pod(sim, ns, job)
            # RestartJob: Volcano kills every pod of the gang and makes a new one of each
            wait_for(
                lambda n=attempt: _job_status(sim, ns, job).get("retryCount", 0) >= n,
                timeout=60,
                what=f"{ns}/{job} restarted ({attempt})",
                interval=0.2,
            )
            wait_for(
                lambda old=before: (
                    len(pods := _pods(sim, ns, job)) == 2
                    and all(p["metadata"]["uid"] not in old and p["spec"].get("nodeName") for p in pods)
                ),
                timeout=60,
                what=f"{ns}/{job}: the whole gang recreated and bound again",
                interval=0.2,
            )
            assert _job_status(sim, ns, job)["retryCount"] == attempt
        # the third failure is past faultTolerance.maxRetry: the job fails instead of restarting
        _fail_one_pod(sim, ns, job)
        wait_for(
            lambda: (_job_status(sim, ns, job).get("state") or {}).get("phase") == "Failed",
            timeout=60,
            what=f"{ns}/{job} Failed after maxRetry",
            interval=0.2,
        )
        assert _job_status(sim, ns, job)["retryCount"] == 3
    finally:
        delete_all(sim.api, ns, VJOB, "Job")
