"""The traffic objects of each rollout.traffic, for a state (stable, canary, step).

argo-rollouts — a Rollout whose pod template serves the newest release; the controller
  shifts traffic between the stable and canary Services. trainops commits one canary step at
  a time: while a canary is under way the Rollout's steps are the previous step's
  `setWeight` (from the second step on), the current step's `setWeight`, `setHeaderRoute`
  (A/B), `analysis` (the AnalysisTemplate made from rollout.analysis.thresholds), then
  `pause: {}`, which waits for the next commit. The order is the controller's: a commit that
  changes the steps makes Argo Rollouts start them again from the first, whose weight it
  applies at once — the previous weight holds the canary's pods and traffic where they were
  (the current weight first would route 0% to the canary until its new pods are Ready, a
  header route first would scale the canary to 0), and a header route set before the
  canary has a Ready pod is removed by the controller again. With no
  canary under way the steps are empty, so a change of the template (a rollback, an abort)
  goes to 100% at once. With rollout.gateway the weights and header routes are set on an
  HTTPRoute through the Argo Rollouts Gateway API plugin; without it Argo Rollouts
  approximates weights by replica counts.
gateway-api — stable and canary Deployments (or LeaderWorkerSets), a Service each, and an
  HTTPRoute on rollout.gateway whose rule sends (100 - w)% to stable and w% to canary; A/B
  header matches go to the canary whole. trainops moves the weights itself, by commits.
kserve — an InferenceService whose predictor is the newest release, with
  canaryTrafficPercent w; KServe keeps the previous revision serving the rest. Only KServe's
  Knative mode reads canaryTrafficPercent (its Standard mode rolls the Deployment over to the
  new release whole), so the mode is rendered explicitly as the annotation
  serving.kserve.io/deploymentMode, and the manifest refuses canary steps with Standard.
"""

from __future__ import annotations

import math
from typing import Any

from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.rollout.context import ServeContext
from trainops.rollout.disagg import disaggregated
from trainops.rollout.routes import canary_weight, header_matches, http_route, service_backend
from trainops.rollout.slo_gate import analysis_query, serving_slos, slo_interval
from trainops.rollout.state import RolloutState, Served
from trainops.rollout.workload import metrics_objects, pod_template, service, workload
from trainops.slo.rules import promql_duration

PLUGIN = "argoproj-labs/gatewayAPI"
AB_ROUTE = "ab-test"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
_ARGO_OPS = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}


def _held_weight(ctx: ServeContext, state: RolloutState) -> int:
    """The weight of the step before the current one: what the canary has when its commit lands."""
    canary = ctx.rollout.canary
    if state.canary is None or state.step is None or state.step == 0 or canary is None:
        return 0
    return canary.steps[state.step - 1].weight


_DOING = {
    "setWeight": "setting the weight",
    "setHeaderRoute": "setting the A/B header route",
    "analysis": "running the analysis",
    "pause": "paused until the next promote",
}


def step_position(ctx: ServeContext, steps: list[dict[str, Any]], index: int | None) -> tuple[str | None, str | None]:
    """The controller's raw step index over a Rollout's steps as _argo_steps commits them, in
    trainops' terms: the canary step ("2/3 50%") and what the controller does in it.

    From the second canary step on a commit starts with the previous step's `setWeight`, so
    the controller's index runs one ahead of the steps a user counts, and at index 0 the
    traffic is still at the previous step. (None, None) without canary steps (stable)."""
    canary = ctx.rollout.canary
    weights = [int(s["setWeight"]) for s in steps if isinstance(s.get("setWeight"), int)]
    if not weights or canary is None:
        return None, None
    total = len(canary.steps)

    def label(weight: int) -> str:
        n = next((i + 1 for i, step in enumerate(canary.steps) if step.weight == weight), None)
        return f"{n if n is not None else '?'}/{total} {weight}%"

    current = label(weights[-1])
    if index is None:
        return current, "not started"
    if index >= len(steps):
        return current, "steps done"
    if len(weights) > 1 and index == 0:
        return label(weights[0]), f"holding the previous weight, then {current}"
    kind = next(iter(steps[index]), "")
    return current, _DOING.get(kind, kind)


def _served_now(state: RolloutState) -> Served:
    served = state.canary or state.stable
    if served is None:
        raise InputError("nothing is served: start a rollout with a release first")
    return served


# -- argo-rollouts ---------------------------------------------------------------------------


def has_analysis(ctx: ServeContext) -> bool:
    """Whether a canary step runs an analysis: rollout.analysis, or the SLOs of spec.slo.serving."""

    return ctx.rollout.analysis is not None or bool(serving_slos(ctx.manifest))


def _slo_metrics(ctx: ServeContext) -> list[dict[str, Any]]:
    """One metric per serving SLO (trainops.rollout.slo_gate): measured once, after the canary window."""

    spec = ctx.manifest.pipeline.spec.slo
    if spec is None:
        return []
    window = promql_duration(slo_interval(ctx.manifest))
    return [
        {
            "name": f"slo-{slo.name}"[:63],
            "initialDelay": window,
            "count": 1,
            "failureLimit": 0,
            "successCondition": "result[0] <= 1",
            "provider": {
                "prometheus": {"address": spec.prometheus, "query": analysis_query(ctx.manifest, slo, window)}
            },
        }
        for slo in serving_slos(ctx.manifest)
    ]


def analysis_template(ctx: ServeContext) -> dict[str, Any]:
    analysis = ctx.rollout.analysis
    metrics = _slo_metrics(ctx)
    for threshold in analysis.thresholds if analysis is not None else []:
        assert analysis is not None
        metric: dict[str, Any] = {
            "name": threshold.metric.replace("_", "-").lower(),
            "interval": analysis.interval,
            "failureLimit": analysis.failure_limit,
            # no `len(result) > 0 &&`: with it an empty result (a canary whose first samples
            # Prometheus has not scraped yet) failed the step at once, as the real controller
            # showed; without it the empty result is a measurement Error, measured again
            # after `interval`, and only consecutiveErrorLimit errors in a row end the run
            "successCondition": f"result[0] {_ARGO_OPS[threshold.op]} {threshold.value:g}",
            "provider": {"prometheus": {"address": analysis.prometheus, "query": threshold.query}},
        }
        if analysis.count is not None:
            metric["count"] = analysis.count
        metrics.append(metric)
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": ctx.metadata(f"{ctx.name}-analysis"),
        "spec": {"metrics": metrics},
    }


def _argo_steps(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    if state.canary is None:
        return []
    steps: list[dict[str, Any]] = []
    held = _held_weight(ctx, state)
    if held:
        steps.append({"setWeight": held})
    steps.append({"setWeight": canary_weight(ctx, state)})
    ab = ctx.rollout.ab_test
    if ab is not None:
        match = [{"headerName": m.header, "headerValue": {m.type: m.value}} for m in ab.match]
        steps.append({"setHeaderRoute": {"name": AB_ROUTE, "match": match}})
    if has_analysis(ctx):
        steps.append({"analysis": {"templates": [{"templateName": f"{ctx.name}-analysis"}]}})
    steps.append({"pause": {}})
    return steps


def _argo_canary(ctx: ServeContext, state: RolloutState) -> dict[str, Any]:
    canary: dict[str, Any] = {"canaryService": f"{ctx.name}-canary", "stableService": f"{ctx.name}-stable"}
    if ctx.rollout.gateway is not None:
        routing: dict[str, Any] = {
            "plugins": {PLUGIN: {"httpRoute": ctx.name, **({"namespace": ctx.namespace} if ctx.namespace else {})}}
        }
        if ctx.rollout.ab_test is not None:
            routing["managedRoutes"] = [{"name": AB_ROUTE}]
        canary["trafficRouting"] = routing
    canary["steps"] = _argo_steps(ctx, state)
    return canary


def argo_rollouts(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    served = _served_now(state)
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": ctx.metadata(ctx.name),
        "spec": {
            "replicas": ctx.rollout.replicas,
            "revisionHistoryLimit": 5,
            # the controller calls a rollout stuck when no new pod became Ready for this long
            # (default 600 s): an engine may take its whole startupBudget to load the weights
            "progressDeadlineSeconds": max(1, math.ceil(duration_seconds(ctx.rollout.startup_budget))),
            "selector": {"matchLabels": ctx.selector()},
            "template": pod_template(ctx, served, track=None),
            "strategy": {"canary": _argo_canary(ctx, state)},
        },
    }
    objects: list[dict[str, Any]] = [rollout]
    for track in ("stable", "canary"):
        objects.append(service(ctx, name=f"{ctx.name}-{track}", selector=ctx.selector(), track=track))
    if ctx.rollout.gateway is not None:
        rule = {
            "backendRefs": [
                service_backend(ctx, f"{ctx.name}-stable", 100),
                service_backend(ctx, f"{ctx.name}-canary", 0),
            ]
        }
        objects.append(http_route(ctx, [rule]))
    if has_analysis(ctx):
        objects.append(analysis_template(ctx))
    return objects + metrics_objects(ctx, ctx.selector())


# -- gateway-api -----------------------------------------------------------------------------


def gateway_api(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    stable = state.stable or state.canary
    if stable is None:
        raise InputError("nothing is served: start a rollout with a release first")
    objects = [workload(ctx, stable, name=f"{ctx.name}-stable", track="stable")]
    objects.append(service(ctx, name=f"{ctx.name}-stable", selector=ctx.selector("stable"), track="stable"))
    rules: list[dict[str, Any]] = []
    if state.canary is not None and state.stable is not None:
        weight = canary_weight(ctx, state)
        objects.append(workload(ctx, state.canary, name=f"{ctx.name}-canary", track="canary"))
        objects.append(service(ctx, name=f"{ctx.name}-canary", selector=ctx.selector("canary"), track="canary"))
        if ctx.rollout.ab_test is not None:
            rules.append(
                {"matches": header_matches(ctx), "backendRefs": [service_backend(ctx, f"{ctx.name}-canary", 1)]}
            )
        backends = [
            service_backend(ctx, f"{ctx.name}-stable", 100 - weight),
            service_backend(ctx, f"{ctx.name}-canary", weight),
        ]
        rules.append({"backendRefs": backends})
    else:
        rules.append({"backendRefs": [service_backend(ctx, f"{ctx.name}-stable", 100)]})
    objects.append(http_route(ctx, rules))
    return objects + metrics_objects(ctx, ctx.selector())


# -- kserve ----------------------------------------------------------------------------------


def kserve(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    served = _served_now(state)
    template = pod_template(ctx, served, track=None)
    spec = template["spec"]
    container = dict(spec["containers"][0], name="kserve-container")
    predictor: dict[str, Any] = {
        "minReplicas": ctx.rollout.replicas,
        "maxReplicas": ctx.rollout.replicas,
        "labels": template["metadata"]["labels"],
        "annotations": template["metadata"]["annotations"],
        "enableServiceLinks": False,
        "securityContext": spec["securityContext"],
    }
    if state.canary is not None and state.stable is not None:
        predictor["canaryTrafficPercent"] = canary_weight(ctx, state)
    if "initContainers" in spec:
        predictor["initContainers"] = spec["initContainers"]
    predictor["containers"] = [container]
    predictor["volumes"] = spec["volumes"]
    metadata = ctx.metadata(ctx.name)
    metadata["annotations"] = {DEPLOYMENT_MODE: ctx.rollout.kserve_deployment_mode}
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {"predictor": predictor},
    }
    return [isvc, *metrics_objects(ctx, {"serving.kserve.io/inferenceservice": ctx.name})]


def traffic_objects(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    if ctx.rollout.traffic == "argo-rollouts":
        return argo_rollouts(ctx, state)
    if ctx.rollout.traffic == "gateway-api" and ctx.rollout.disaggregation is not None:
        if ctx.rollout.disaggregation.workload == "llm-inference-service":
            return disaggregated(ctx, state)  # KServe's pods: its own ports and monitors
        return disaggregated(ctx, state) + metrics_objects(ctx, ctx.selector())
    if ctx.rollout.traffic == "gateway-api":
        return gateway_api(ctx, state)
    return kserve(ctx, state)
