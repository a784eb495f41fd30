"""Checks of rollout.disaggregation against the rest of the manifest (the engine's
connectors, the traffic method, the cluster topology): what the models alone cannot see.
Each is a (manifest location, message) pair, reported at the line of the field at fault."""

from __future__ import annotations

from trainops.manifest.disagg import CONNECTORS, ROLES
from trainops.manifest.pipeline import PipelineSpec


def _ratio(text: str) -> tuple[int, int]:
    p, d = text.split(":")
    return int(p), int(d)


def disaggregation_problems(spec: PipelineSpec) -> list[tuple[tuple[str | int, ...], str]]:
    """(manifest location, message) of every disaggregation setting the engine, the traffic
    method or the cluster cannot serve."""
    rollout = spec.rollout
    if rollout is None or rollout.disaggregation is None:
        return []
    d = rollout.disaggregation
    at = ("spec", "rollout", "disaggregation")
    out: list[tuple[tuple[str | int, ...], str]] = []
    known = CONNECTORS[rollout.engine]
    if d.connector not in known:
        other = next((e for e, names in CONNECTORS.items() if d.connector in names), None)
        also = f" ({d.connector} is {other}'s)" if other else ""
        out.append(
            (
                (*at, "connector"),
                f"{rollout.engine} has no connector {d.connector}{also}: use one of {', '.join(known)}",
            )
        )
    if rollout.traffic != "gateway-api":
        out.append(
            (
                ("spec", "rollout", "traffic"),
                f"disaggregation is routed by InferencePools on the Gateway API, not {rollout.traffic}: "
                "use traffic gateway-api",
            )
        )
    if d.ratio is not None:
        p, q = _ratio(d.ratio)
        pr, dr = d.prefill.replicas, d.decode.replicas
        if pr % p or dr % q or pr // p != dr // q:
            out.append(
                (
                    (*at, "ratio"),
                    f"ratio {d.ratio} does not divide the replicas (prefill {pr}, decode {dr}): "
                    f"set them to k×{p} and k×{q} for one k",
                )
            )
    for role in ROLES:
        size = getattr(d, role)
        if size.gpus_per_replica > rollout.gpus_per_node and size.gpus_per_replica % rollout.gpus_per_node:
            out.append(
                (
                    (*at, role, "gpusPerReplica"),
                    f"{role} gpusPerReplica ({size.gpus_per_replica}) spans nodes: it must be a multiple of "
                    f"gpusPerNode ({rollout.gpus_per_node})",
                )
            )
    if d.workload == "llm-inference-service" and rollout.engine != "vllm":
        out.append(
            (
                (*at, "workload"),
                "KServe's LLMInferenceService presets run vLLM: use engine vllm, or workload disaggregated-set",
            )
        )
    if d.endpoint_picker is None and d.workload != "llm-inference-service":
        out.append((at, "missing required field 'endpointPicker': the image of each pool's endpoint picker"))
    if d.placement is not None and d.workload != "disaggregated-set":
        out.append(((*at, "placement"), "placement is DisaggregatedSet's: set workload disaggregated-set"))
    elif d.placement is not None:
        fabric = spec.cluster.topology if spec.cluster is not None else None
        tiers = [t.name for t in fabric.tiers] if fabric is not None else []
        if d.placement not in tiers:
            where = f"one of {', '.join(tiers)}" if tiers else "declare spec.cluster.topology first"
            out.append(((*at, "placement"), f"placement {d.placement} is no tier of cluster.topology: {where}"))
    return out
