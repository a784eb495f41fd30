"""Keeping a restarted job off failed nodes: every pod template of every job kind gets the
exclusion in each required node-affinity term, merged with one it already has, and nothing
else of the job changes (its topology constraint stays); and `train watch` refuses a target
that is not Kubernetes in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.targets import write_variant
from tests.render.helpers import IMAGE, templates
from trainops.errors import NotFoundError
from trainops.manifest import load_manifest
from trainops.render import render_all
from trainops.train.exclude import HOSTNAME, _excluded_files, exclude_nodes
from trainops_testing.cli import run

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


def _differences(before: Any, after: Any, path: str = "") -> list[str]:
    """The paths at which two parsed documents differ (a key only one has, a value changed)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = before.keys() | after.keys()
        return [p for key in keys for p in _differences(before.get(key), after.get(key), f"{path}/{key}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        pairs = enumerate(zip(before, after, strict=True))
        return [p for i, (b, a) in pairs for p in _differences(b, a, f"{path}/{i}")]
    return [] if before == after else [path]


@pytest.mark.parametrize(
    ("variant", "kind", "kept"),
    [
        # a Volcano Job's HyperNode constraint: the whole gang within one rack (tier 1)
        ("volcano-topology", "Job", lambda job: job["spec"]["networkTopology"]),
        # Kueue TAS: every pod set required within one rack, as a JobSet and as an indexed Job
        ("kueue-topology", "JobSet", lambda job: _tas(job)),
        ("kueue-job", "Job", lambda job: _tas(job)),
    ],
)
def test_a_restart_keeps_the_runs_topology_constraint(
    tmp_path: Path, variant: str, kind: str, kept: Callable[[dict[str, Any]], Any]
) -> None:
    """The job a restart commits back is the rendered one with the exclusion added to its pod
    templates and nothing else changed: the same rack/HyperNode (Volcano networkTopology) or
    Kueue TAS level as the original, so the run comes back as tightly placed as it ran."""
    manifest = load_manifest(write_variant(tmp_path, variant))
    rendered = render_all(manifest, image=IMAGE, run_id="r1")
    files = {f.path: f.text.encode() for f in rendered.files if f.path.startswith("train/")}
    out = _excluded_files(files, sorted(files), ["gpu-3"])
    for name in sorted(files):
        before = [d for d in yaml.safe_load_all(files[name]) if d]
        after = [d for d in yaml.safe_load_all(out[name]) if d]
        changed = _differences(before, after)
        assert all(p.endswith("/spec/affinity") or "/spec/affinity/nodeAffinity/" in p for p in changed), changed
    [job] = [d for name in files for d in yaml.safe_load_all(out[name]) if d and d["kind"] == kind]
    [original] = [d for name in files for d in yaml.safe_load_all(files[name]) if d and d["kind"] == kind]
    assert kept(job) == kept(original) and kept(job), kept(job)
    assert "gpu-3" in yaml.safe_dump(job)


def _tas(job: dict[str, Any]) -> list[str]:
    """The Kueue TAS level each pod template of the job requires."""
    from trainops.render.kueue import TAS_REQUIRED

    return [t["metadata"]["annotations"][TAS_REQUIRED] for t in templates(job).values()]
