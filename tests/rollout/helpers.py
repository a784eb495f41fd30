"""Manifests and states for the serving tests: the tiny-llm example with rollout overlays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.render.helpers import variant
from trainops.rollout.context import serve_context
from trainops.rollout.render import ServingTree, build_tree
from trainops.rollout.state import RolloutState, Served

D1 = "sha256:" + "11" * 32
D2 = "sha256:" + "22" * 32
IMAGE = "harbor.example.com/llm/tiny-llm/serve-vllm@sha256:" + "ab" * 32
V1 = Served(f"oci://harbor.example.com/llm/tiny-llm/model:v1@{D1}", IMAGE)
V2 = Served(f"oci://harbor.example.com/llm/tiny-llm/model:v2@{D2}", IMAGE)
CANARY = RolloutState(stable=V1, canary=V2, step=0)
STABLE = RolloutState(stable=V1)
NO_AB = {"abTest": None, "gateway": None}


def rollout(overlay: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"rollout": overlay}}


def tree(directory: Path, overlay: dict[str, Any], state: RolloutState = CANARY) -> ServingTree:
    return build_tree(serve_context(variant(directory, overlay)), state)
