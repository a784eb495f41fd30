"""spec.tenants as Volcano Queues and Kueue ClusterQueues/LocalQueues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.render.helpers import variant
from trainops.render import render_tenants, validate_objects

KUEUE = {"scheduler": "kueue", "topology": None}


def _tenants(tmp_path: Path, tenants: list[dict[str, Any]], train: dict[str, Any] | None = None) -> Any:
    overlay: dict[str, Any] = {"spec": {"tenants": tenants, "patches": None}}
    if train:
        overlay["spec"]["train"] = train
    rendered = render_tenants(variant(tmp_path, overlay))
    assert validate_objects(rendered.objects, sources=rendered.sources) == []
    return rendered


def test_volcano_queue_from_quotas(tmp_path: Path) -> None:
    tenant = {
        "name": "research",
        "gpus": {"guarantee": 8, "deserved": 16, "capability": 32},
        "cpu": {"capability": 512},
        "memory": {"guarantee": "1Ti"},
        "weight": 3,
        "reclaimable": False,
    }
    rendered = _tenants(tmp_path, [tenant], {"resources": {"gpuResource": "amd.com/gpu"}})
    (queue,) = rendered.objects
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1" and queue["metadata"]["name"] == "research"
    assert "namespace" not in queue["metadata"]  # cluster-scoped
    assert queue["spec"] == {
        "weight": 3,
        "reclaimable": False,
        "capability": {"cpu": 512, "amd.com/gpu": 32},
        "deserved": {"amd.com/gpu": 16},
        "guarantee": {"resource": {"memory": "1Ti", "amd.com/gpu": 8}},
    }
    assert "trainops.dev/run-id" not in queue["metadata"]["labels"]  # queues outlive runs


def test_kueue_quotas_in_a_cohort_borrow_and_lend(tmp_path: Path) -> None:
    tenant = {
        "name": "research",
        "namespaces": ["a", "b"],
        "cohort": "shared",
        "gpus": {"guarantee": 8, "deserved": 16, "capability": 32},
        "memory": {"guarantee": "1Ti", "deserved": "2Ti", "capability": "4Ti"},
    }
    rendered = _tenants(tmp_path, [tenant], KUEUE)
    kinds = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in rendered.objects]
    assert kinds == [
        ("ResourceFlavor", "default-flavor", None),
        ("ClusterQueue", "research", None),
        ("LocalQueue", "research", "a"),
        ("LocalQueue", "research", "b"),
    ]
    queue = rendered.objects[1]["spec"]
    assert queue["cohortName"] == "shared"
    assert queue["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}
    ]
    (group,) = queue["resourceGroups"]
    assert group["coveredResources"] == ["memory", "nvidia.com/gpu"]
    assert group["flavors"][0]["resources"] == [
        {"name": "memory", "nominalQuota": "2Ti", "borrowingLimit": "2Ti", "lendingLimit": "1Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 16, "lendingLimit": 8},
    ]
    assert queue["preemption"]["reclaimWithinCohort"] == "Any"
    assert rendered.objects[2]["spec"] == {"clusterQueue": "research"}


def test_kueue_without_a_cohort_neither_borrows_nor_lends(tmp_path: Path) -> None:
    rendered = _tenants(
        tmp_path, [{"name": "t", "namespaces": ["a"], "gpus": {"guarantee": 4, "capability": 8}}], KUEUE
    )
    resources = rendered.objects[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources == [{"name": "nvidia.com/gpu", "nominalQuota": 4}]
    assert "preemption" not in rendered.objects[1]["spec"]


def test_a_tenant_flavor_is_used_and_not_rendered(tmp_path: Path) -> None:
    rendered = _tenants(
        tmp_path, [{"name": "t", "namespaces": ["a"], "gpus": {"deserved": 8}, "flavor": "h100"}], KUEUE
    )
    assert [o["kind"] for o in rendered.objects] == ["ClusterQueue", "LocalQueue"]
    assert rendered.objects[0]["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "h100"


def test_kueue_warns_about_what_it_would_not_admit(tmp_path: Path) -> None:
    rendered = _tenants(tmp_path, [{"name": "research", "gpus": {"deserved": 8}}], KUEUE)
    text = "\n".join(rendered.warnings)
    assert "lists no namespaces: its ClusterQueue admits nothing" in text
    assert "requests cpu, memory, rdma/rdma_shared_device_a, which its ClusterQueue does not cover" in text
    assert "namespaceSelector" not in rendered.objects[1]["spec"]  # null selects no namespace


def test_no_tenants_renders_nothing(tmp_path: Path) -> None:
    rendered = render_tenants(variant(tmp_path, {"spec": {"tenants": None}}))
    assert rendered.files == [] and rendered.objects == []
