"""Strict validation against the vendored CRDs (and trainops' schemas for kinds without one)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import render, train, variant
from trainops.errors import InputError
from trainops.render import check_render, validate_objects
from trainops.render.crds import VENDORED, crd_index, strict_schema
from trainops.render.validate import format_path

TARGETS: dict[str, dict[str, Any]] = {
    "volcano": {},
    "volcano-1-node": train({"nodes": 1}),
    "kueue-jobset": train(
        {
            "scheduler": "kueue",
            "topology": {"mode": "hard", "level": "topology.k8s.io/zone", "highestTierAllowed": None},
        }
    ),
    "kueue-job": train({"scheduler": "kueue", "kueue": {"workload": "job"}, "topology": None}),
    "pytorchjob": train({"scheduler": "pytorchjob", "topology": None}),
    "pytorchjob-elastic": train(
        {"scheduler": "pytorchjob", "topology": None, "nodes": 3, "elastic": {"minNodes": 1, "maxNodes": 4}}
    ),
}


def _patch(merge: dict[str, Any], kind: str = "Job") -> dict[str, Any]:
    return {"spec": {"patches": [{"target": {"kind": kind}, "merge": merge}]}}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_target_validates_with_zero_problems(target: str, tmp_path: Path) -> None:
    overlay = copy.deepcopy(TARGETS[target])
    if "kueue" in target or "pytorchjob" in target:
        overlay.setdefault("spec", {})["patches"] = None  # the example's patch targets a Volcano Job
    check = check_render(variant(tmp_path, overlay))
    assert check.problems == []
    assert check.objects >= 2  # the job (and Service) plus the tenant's queues


def test_an_unknown_field_from_a_patch_is_reported_at_its_path(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path))
    job = copy.deepcopy(rendered.objects[0])
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resourcez"] = {"limits": {"cpu": 1}}
    problems = validate_objects([job], sources=["train/volcano-job.yaml"])
    assert [p.path for p in problems] == ["spec.tasks[0].template.spec.containers[0].resourcez"]
    assert "did you mean resources?" in problems[0].message
    assert str(problems[0]).startswith("train/volcano-job.yaml: Job/tiny-llm-run-")


def test_unknown_field_through_spec_patches_fails_check_render(tmp_path: Path) -> None:
    overlay = _patch({"spec": {"plugins": {"pytorch": ["--port=29500"]}, "minAvailabel": 2}})
    check = check_render(variant(tmp_path, overlay))
    assert [p.path for p in check.problems] == ["spec.minAvailabel"]
    assert "minAvailable" in check.problems[0].message


def test_a_wrong_type_is_reported(tmp_path: Path) -> None:
    check = check_render(variant(tmp_path, _patch({"spec": {"minAvailable": "two", "maxRetry": 2**40}})))
    by_path = {p.path: p.message for p in check.problems}
    assert by_path["spec.minAvailable"] == "expected integer, got string 'two'"
    assert "maximum" in by_path["spec.maxRetry"]  # format: int32


def test_a_bad_quantity_and_enum_are_reported(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path))
    job = copy.deepcopy(rendered.objects[0])
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    spec["containers"][0]["resources"]["limits"]["cpu"] = "lots"
    job["spec"]["networkTopology"]["mode"] = "strict"
    paths = {p.path: p.message for p in validate_objects([job])}
    assert "does not match" in paths["spec.tasks[0].template.spec.containers[0].resources.limits.cpu"]
    assert paths["spec.networkTopology.mode"] == "'strict' is not one of: hard, soft"


def test_duplicate_keys_of_a_list_map_are_reported(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path))
    job = copy.deepcopy(rendered.objects[0])
    env = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": env[0]["name"], "value": "again"})
    problems = validate_objects([job])
    assert len(problems) == 1 and problems[0].path.endswith(f"env[{len(env) - 1}]")
    assert "duplicate entry (name=TRAINOPS_PIPELINE)" in problems[0].message


def test_a_patch_that_matches_nothing_is_an_error_naming_its_index(tmp_path: Path) -> None:
    overlay = {
        "spec": {
            "patches": [
                {"target": {"kind": "Job"}, "merge": {"metadata": {"labels": {"a": "b"}}}},
                {"target": {"kind": "Job", "name": "not-this-one"}, "merge": {"metadata": {"labels": {"a": "b"}}}},
            ]
        }
    }
    manifest = variant(tmp_path, overlay)
    with pytest.raises(InputError, match=r"spec\.patches\[1\]: no rendered Job named not-this-one"):
        render(manifest)
    check = check_render(manifest)
    assert not check.ok and "spec.patches[1]" in check.problems[0].message


def test_patch_null_removes_and_lists_replace(tmp_path: Path) -> None:
    overlay = _patch({"spec": {"networkTopology": None, "policies": [{"event": "PodFailed", "action": "AbortJob"}]}})
    job = render(variant(tmp_path, overlay)).objects[0]
    assert "networkTopology" not in job["spec"]
    assert job["spec"]["policies"] == [{"event": "PodFailed", "action": "AbortJob"}]


def test_metadata_is_checked_as_objectmeta(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path))
    job, queue = copy.deepcopy(rendered.objects[0]), copy.deepcopy(rendered.objects[1])
    job["metadata"]["labels"]["bad key!"] = "x"
    job["metadata"]["labels"]["ok"] = "not ok value"
    job["metadata"]["resourceVersion"] = "1"
    job["metadata"]["name"] = "Has_Upper"
    queue["metadata"]["namespace"] = "tiny-llm"  # Queue is cluster-scoped
    paths = {p.path: p.message for p in validate_objects([job, queue])}
    assert paths['metadata.labels["bad key!"]'].startswith("invalid label key")
    assert paths["metadata.labels.ok"].startswith("invalid label value")
    assert paths["metadata.resourceVersion"] == "set by the API server; do not render it"
    assert "DNS-1123 label" in paths["metadata.name"]
    assert paths["metadata.namespace"] == "Queue is cluster-scoped: remove the namespace"


def test_the_pod_template_of_a_batch_job_is_checked_against_upstream(tmp_path: Path) -> None:
    rendered = render(variant(tmp_path, train({"scheduler": "kueue", "kueue": {"workload": "job"}, "topology": None})))
    job = next(o for o in rendered.objects if o["kind"] == "Job")
    broken = copy.deepcopy(job)
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    broken["spec"]["backofLimit"] = 3
    broken["spec"]["completionMode"] = "Sometimes"
    paths = {p.path: p.message for p in validate_objects([broken])}
    assert "did you mean imagePullPolicy?" in paths["spec.template.spec.containers[0].imagePullPolicyy"]
    assert "did you mean backoffLimit?" in paths["spec.backofLimit"]
    assert paths["spec.completionMode"] == "'Sometimes' is not one of: NonIndexed, Indexed"


def test_jobset_and_resourceflavor_have_schemas(tmp_path: Path) -> None:
    overlay = train({"scheduler": "kueue", "topology": None})
    overlay["spec"]["patches"] = None
    rendered = render(variant(tmp_path, overlay))
    jobset = copy.deepcopy(next(o for o in rendered.objects if o["kind"] == "JobSet"))
    flavor = copy.deepcopy(next(o for o in rendered.objects if o["kind"] == "ResourceFlavor"))
    jobset["spec"]["replicatedJobs"][1]["replica"] = 2
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"] = "x"
    flavor["spec"]["nodeLabel"] = {"a": "b"}
    flavor["metadata"]["namespace"] = "x"
    paths = {p.path: p.message for p in validate_objects([jobset, flavor])}
    assert "did you mean replicas?" in paths["spec.replicatedJobs[1].replica"]
    assert paths["spec.replicatedJobs[0].template.spec.template.spec.containers[0].args"].startswith("expected array")
    assert "did you mean nodeLabels?" in paths["spec.nodeLabel"]
    assert "cluster-scoped" in paths["metadata.namespace"]


def test_a_kind_without_a_schema_is_a_problem() -> None:
    problems = validate_objects([{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}])
    assert len(problems) == 1 and "no schema for example.com/v1 Widget" in problems[0].message


def test_a_version_the_crd_does_not_have_is_a_problem() -> None:
    queue = {"apiVersion": "kueue.x-k8s.io/v1alpha9", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "n"}}
    problems = validate_objects([queue])
    assert "has no version v1alpha9 of LocalQueue" in problems[0].message
    assert "kueue.x-k8s.io/v1beta2" in problems[0].message


def test_crds_dir_replaces_the_vendored_crds(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    shutil.copy(VENDORED / "volcano-batch-job.yaml", crds)
    no_slo = {"spec": {"slo": None}}
    rendered = render(variant(tmp_path, no_slo))
    job, queue, _application = rendered.objects
    assert validate_objects([job], crds_dir=crds) == []
    problems = validate_objects([queue], crds_dir=crds)
    assert "no schema for scheduling.volcano.sh/v1beta1 Queue" in problems[0].message
    check = check_render(variant(tmp_path, no_slo), crds_dir=crds)
    assert [p.kind for p in check.problems] == ["Queue", "Application"]


def test_a_crd_in_crds_dir_is_used_for_a_kind_trainops_has_a_schema_for(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "jobset.yaml").write_text(
        """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: jobsets.jobset.x-k8s.io}
spec:
  group: jobset.x-k8s.io
  names: {kind: JobSet, plural: jobsets}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              suspend: {type: boolean}
""",
        encoding="utf-8",
    )
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "j"},
        "spec": {"replicatedJobs": []},
    }
    problems = validate_objects([obj], crds_dir=crds)
    assert [p.path for p in problems] == ["spec.replicatedJobs"]


def test_the_index_reads_only_group_and_kind_and_loads_crds_on_demand() -> None:
    from trainops.render import crds as module

    module._index.cache_clear()
    module._document.cache_clear()
    index = crd_index()
    assert index[("batch.volcano.sh", "Job")].path.name == "volcano-batch-job.yaml"
    assert index[("kueue.x-k8s.io", "ClusterQueue")].path.name == "kueue-clusterqueue.yaml"
    assert module._document.cache_info().currsize == 0  # indexing parsed no schema
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "n"},
        "spec": {"clusterQueue": "c"},
    }
    assert validate_objects([queue]) == []
    assert module._document.cache_info().currsize == 1  # only kueue-localqueue.yaml was loaded


def test_strict_schema_closes_objects_and_honours_kubernetes_extensions() -> None:
    schema = strict_schema(
        {
            "type": "object",
            "properties": {
                "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
                "open": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"a": {"type": "string"}},
                },
                "map": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": True},
                "maybe": {"type": "string", "nullable": True},
                "small": {"type": "integer", "format": "int32"},
                "empty": {"type": "object"},
            },
        }
    )
    from trainops.render.crds import make_validator

    validator = make_validator(schema)
    ok = {"closed": {"a": "x"}, "open": {"b": 1}, "map": {"k": "v"}, "port": 80, "maybe": None, "small": 1, "empty": {}}
    assert list(validator.iter_errors(ok)) == []
    assert list(validator.iter_errors({"port": "http"})) == []
    bad = {"closed": {"b": 1}, "port": 1.5, "small": 2**31, "empty": {"x": 1}, "extra": 1}
    paths = sorted(format_path(e.absolute_path) for e in validator.iter_errors(bad))
    assert paths == ["closed.b", "empty.x", "extra", "port", "small"]
