"""The core Kubernetes parts of every rendered job, checked against Kubernetes' own schemas.

trainops validates against the upstream CRDs it vendors; the kinds with no CRD there
(batch/v1 Job, v1 Service, the Jobs inside a JobSet) are checked by trainops against the
core PodTemplateSpec a CRD carries plus an allow-list. This is the independent check:
kubernetes-validate's strict JSON Schemas, generated from the Kubernetes OpenAPI spec of
the release named below, where an unknown field is an error as in trainops.

- Job and Service are validated whole;
- every pod template of every target, as a v1 PodTemplate;
- every JobSet replicatedJobs[].template, as the jobTemplate of a batch/v1 CronJob.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.render.helpers import render, train, variant
from trainops_testing.projects import merge

# Native sidecars (initContainers[].restartPolicy: Always) are on by default from 1.29.
KUBERNETES = "1.31"
KUEUE_TOPOLOGY = {"mode": "hard", "level": "cloud.provider.com/topology-block"}
TARGETS: dict[str, dict[str, Any]] = {
    "volcano": {},
    "kueue-jobset": train(
        {"scheduler": "kueue", "topology": KUEUE_TOPOLOGY, "checkpoint": {"claim": "ckpt", "registrySecret": "creds"}}
    ),
    "kueue-job": train({"scheduler": "kueue", "kueue": {"workload": "job"}, "topology": KUEUE_TOPOLOGY}),
    "pytorchjob": train(
        {"scheduler": "pytorchjob", "nodes": 4, "elastic": {"minNodes": 2, "maxNodes": 8}, "topology": None}
    ),
}


def _strict(obj: dict[str, Any]) -> None:
    try:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path)
        raise AssertionError(f"{obj['kind']} {where}: {err.message}") from None


def _pod_templates(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        template = node.get("template")
        if isinstance(template, dict) and "containers" in (template.get("spec") or {}):
            found.append(template)
        for value in node.values():
            found.extend(_pod_templates(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_pod_templates(value))
    return found


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_rendered_core_parts_pass_kubernetes_strict_schemas(target: str, tmp_path: Path) -> None:
    overlay = merge(TARGETS[target], {"spec": {"patches": []}})  # the example's patch targets the Volcano Job
    rendered = render(variant(tmp_path, overlay))
    checked = 0
    for obj in rendered.objects:
        if obj["apiVersion"] in ("batch/v1", "v1"):
            _strict(obj)
            checked += 1
        for template in _pod_templates(obj.get("spec")):
            _strict({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template})
            checked += 1
        if obj["kind"] == "JobSet":
            for job in obj["spec"]["replicatedJobs"]:
                cron = {"schedule": "@yearly", "jobTemplate": job["template"]}
                _strict({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "t"}, "spec": cron})
                checked += 1
    assert checked >= 2, f"{target}: nothing was checked"


def test_the_check_is_strict(tmp_path: Path) -> None:
    """An unknown field in a pod template fails it: the check above can fail."""
    rendered = render(variant(tmp_path, TARGETS["kueue-job"]))
    job = next(o for o in rendered.objects if o["kind"] == "Job")
    job["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(AssertionError, match="resourcez"):
        _strict(job)
