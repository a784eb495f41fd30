"""The Gateway API pieces every traffic method that routes by HTTPRoute shares (plain
gateway-api Services, disaggregated InferencePools): the canary's weight at a step, the
route on rollout.gateway, a Service backend, the A/B header matches."""

from __future__ import annotations

from typing import Any

from trainops.errors import InputError
from trainops.rollout.context import ServeContext
from trainops.rollout.state import RolloutState


def canary_weight(ctx: ServeContext, state: RolloutState) -> int:
    if state.canary is None or state.step is None:
        return 0
    canary = ctx.rollout.canary
    if canary is None or state.step >= len(canary.steps):
        raise InputError(
            f"the GitOps repo is at canary step {state.step}, which rollout.canary.steps does not have",
            hint="abort the canary, or restore the steps it was started with",
        )
    return canary.steps[state.step].weight


def http_route(ctx: ServeContext, rules: list[dict[str, Any]]) -> dict[str, Any]:
    gateway = ctx.rollout.gateway
    assert gateway is not None
    parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway.name}
    if gateway.namespace:
        parent["namespace"] = gateway.namespace
    if gateway.section_name:
        parent["sectionName"] = gateway.section_name
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": ctx.metadata(ctx.name),
        "spec": {"parentRefs": [parent], "rules": rules},
    }


def service_backend(ctx: ServeContext, name: str, weight: int) -> dict[str, Any]:
    return {"group": "", "kind": "Service", "name": name, "port": ctx.rollout.port, "weight": weight}


def header_matches(ctx: ServeContext) -> list[dict[str, Any]]:
    ab = ctx.rollout.ab_test
    if ab is None:
        return []
    headers = [
        {"type": "Exact" if m.type == "exact" else "RegularExpression", "name": m.header, "value": m.value}
        for m in ab.match
    ]
    return [{"headers": headers}]
