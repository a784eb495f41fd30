"""Keeping a restarted job off failed nodes: every pod template of every job kind gets the
exclusion in each required node-affinity term, merged with one it already has; and `train
watch` refuses a target that is not Kubernetes in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.runner import run
from trainops.errors import NotFoundError
from trainops.train.exclude import HOSTNAME, _excluded_files, exclude_nodes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"


def _pod(**spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "train", "image": "i"}], **spec}


def test_every_pod_template_of_a_volcano_job_is_kept_off_the_nodes() -> None:
    job = {"kind": "Job", "spec": {"tasks": [{"template": {"spec": _pod()}}, {"template": {"spec": _pod()}}]}}
    assert exclude_nodes(job, ["gpu-2", "gpu-1"]) == 2
    for task in job["spec"]["tasks"]:
        terms = task["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        expected = {"key": HOSTNAME, "operator": "NotIn", "values": ["gpu-1", "gpu-2"]}
        assert terms["nodeSelectorTerms"] == [{"matchExpressions": [expected]}]


def test_an_existing_affinity_keeps_its_terms_and_its_exclusion_grows() -> None:
    pool = {"key": "node.trainops.dev/pool", "operator": "In", "values": ["gpu"]}
    earlier = {"key": HOSTNAME, "operator": "NotIn", "values": ["gpu-0"]}
    required = {"nodeSelectorTerms": [{"matchExpressions": [pool, earlier]}, {"matchExpressions": [dict(pool)]}]}
    spec = _pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})
    jobset = {"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": spec}}}}]}}
    assert exclude_nodes(jobset, ["gpu-3"]) == 1
    first, second = required["nodeSelectorTerms"]
    assert first["matchExpressions"] == [pool, {"key": HOSTNAME, "operator": "NotIn", "values": ["gpu-0", "gpu-3"]}]
    # terms are ORed: each one must exclude the node, or the scheduler could pick it through the other
    assert second["matchExpressions"] == [pool, {"key": HOSTNAME, "operator": "NotIn", "values": ["gpu-3"]}]


def test_an_object_without_a_pod_template_is_left_alone() -> None:
    service = {"kind": "Service", "spec": {"selector": {"app": "x"}, "ports": [{"port": 1}]}}
    assert exclude_nodes(service, ["gpu-0"]) == 0
    assert "affinity" not in str(service)


def test_watch_refuses_a_target_that_is_not_kubernetes() -> None:
    out = run("train", "watch", "r1", "-f", str(EXAMPLE), "--env", "dev", "--kubeconfig", "/nonexistent")
    assert out.code == 2, out.stderr
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("Error: train.scheduler is local: `train watch` watches Kubernetes runs")
    )


def test_the_runs_monitor_and_dashboard_come_back_as_they_were() -> None:
    """A run's train/ files beside its job (spec.slo.training's PodMonitor and dashboard) hold no
    pod template: the job is kept off the nodes, they are restored byte for byte."""
    job = yaml.safe_dump({"kind": "Job", "spec": {"template": {"spec": _pod()}}}).encode()
    dashboard = b"kind: ConfigMap\ndata: {a.json: '{}'}\n"
    monitor = b"kind: PodMonitor\nspec: {podMetricsEndpoints: [{port: metrics}]}\n"
    files = {"train/job.yaml": job, "train/dashboard.yaml": dashboard, "train/podmonitor.yaml": monitor}
    out = _excluded_files(files, sorted(files), ["gpu-1"])
    assert out["train/dashboard.yaml"] == dashboard and out["train/podmonitor.yaml"] == monitor
    assert b"gpu-1" in out["train/job.yaml"]
    with pytest.raises(NotFoundError, match="hold no pod template to keep off gpu-1"):
        _excluded_files({"train/dashboard.yaml": dashboard}, ["train/dashboard.yaml"], ["gpu-1"])
