"""Every engine × traffic combination (and the multi-node and image-volume variants) matches its
golden files, and every object in them passes strict validation.

Golden trees live in tests/golden/serve/<case>/; each is the tree of a canary at its first
step (stable v1, canary v2), which holds every object the combination renders; STABLE_CASES
trees hold the stable release alone. After an
intended change, regenerate with TRAINOPS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import REPO
from tests.rollout.helpers import NO_AB, STABLE, rollout, tree
from trainops.rollout.render import ServingTree, check_tree

GOLDEN = REPO / "tests" / "golden" / "serve"
UPDATE = os.environ.get("TRAINOPS_UPDATE_GOLDEN") == "1"
GATEWAY = {"gateway": {"name": "inference", "namespace": "gateway"}}
CASES: dict[str, dict[str, Any]] = {
    # the example as written: Argo Rollouts through the Gateway API plugin, A/B by header, analysis
    "vllm-argo-rollouts": rollout({}),
    # the init container checks the release's signature with a key from a ConfigMap first
    "vllm-argo-rollouts-signed": rollout({"verifySignature": {"configMap": "release-signing", "key": "release.pub"}}),
    "sglang-argo-rollouts": rollout({"engine": "sglang", **NO_AB, "metrics": "annotations"}),
    "vllm-gateway-api": rollout({"traffic": "gateway-api", **GATEWAY}),
    "sglang-gateway-api": rollout({"engine": "sglang", "traffic": "gateway-api", **GATEWAY, "abTest": None}),
    "vllm-kserve": rollout({"traffic": "kserve", **NO_AB, "engineArgs": ["--enable-prefix-caching"]}),
    "sglang-kserve": rollout({"engine": "sglang", "traffic": "kserve", **NO_AB, "modelDelivery": "image-volume"}),
    # a replica over two nodes of 8 GPUs: LeaderWorkerSets behind the HTTPRoute
    "vllm-gateway-api-lws": rollout(
        {"traffic": "gateway-api", "gpusPerReplica": 16, "tensorParallel": 8, "pipelineParallel": 2, **GATEWAY}
    ),
    "sglang-gateway-api-lws": rollout(
        {
            "engine": "sglang",
            "traffic": "gateway-api",
            "gpusPerReplica": 32,
            "gpusPerNode": 8,
            "tensorParallel": 16,
            "pipelineParallel": 2,
            "modelDelivery": "image-volume",
            **GATEWAY,
        }
    ),
}


# Trees with no canary under way: KServe's Standard mode takes no canary steps (the manifest
# refuses them), so its tree is the stable one, with the mode rendered explicitly.
STABLE_CASES: dict[str, dict[str, Any]] = {
    "vllm-kserve-standard": rollout(
        {"traffic": "kserve", "kserveDeploymentMode": "Standard", "canary": None, "analysis": None, **NO_AB}
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tree_matches_golden_and_validates(case: str, tmp_path: Path) -> None:
    assert_golden(case, tree(tmp_path, CASES[case]))


@pytest.mark.parametrize("case", sorted(STABLE_CASES))
def test_stable_tree_matches_golden_and_validates(case: str, tmp_path: Path) -> None:
    assert_golden(case, tree(tmp_path, STABLE_CASES[case], STABLE))


def assert_golden(case: str, rendered: ServingTree) -> None:
    assert check_tree(rendered) == []
    golden = GOLDEN / case
    if UPDATE:
        for item in rendered.files:
            target = golden / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item.text, encoding="utf-8")
    expected = sorted(str(p.relative_to(golden)) for p in golden.rglob("*") if p.is_file())
    assert sorted(item.path for item in rendered.files) == expected
    for item in rendered.files:
        assert item.text == (golden / item.path).read_text(encoding="utf-8"), f"{case}/{item.path} differs"


@pytest.mark.parametrize("case", sorted(CASES))
def test_stable_only_tree_validates(case: str, tmp_path: Path) -> None:
    rendered = tree(tmp_path, CASES[case], STABLE)
    assert check_tree(rendered) == []
    kinds = [obj["kind"] for obj in rendered.objects]
    assert not any(obj["metadata"]["name"].endswith("-canary") and obj["kind"] != "Service" for obj in rendered.objects)
    assert kinds


@pytest.mark.parametrize(
    ("case", "kind", "path", "value", "expected"),
    [
        ("vllm-gateway-api", "Deployment", ["spec", "replica"], 2, "spec.replica: unknown field"),
        ("vllm-gateway-api", "Deployment", ["spec", "strategy", "type"], "Canary", "spec.strategy.type"),
        ("vllm-argo-rollouts", "Rollout", ["spec", "strategy", "canary", "stepz"], [], "unknown field"),
        ("vllm-kserve", "InferenceService", ["spec", "predictor", "canaryTrafficPercent"], "ten", "expected integer"),
        ("vllm-gateway-api-lws", "LeaderWorkerSet", ["spec", "leaderWorkerTemplate", "size"], "2", "expected"),
        ("vllm-argo-rollouts", "ServiceMonitor", ["spec", "endpoints"], {"port": "http"}, "expected array"),
    ],
)
def test_a_wrong_field_is_a_problem(
    case: str, kind: str, path: list[str], value: object, expected: str, tmp_path: Path
) -> None:
    rendered = tree(tmp_path, CASES[case])
    obj = next(o for o in rendered.objects if o["kind"] == kind)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    problems = [str(p) for p in check_tree(rendered)]
    assert any(expected in p for p in problems), problems
