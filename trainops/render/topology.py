"""spec.cluster.topology as the schedulers' own objects.

Volcano (schedulers volcano and pytorchjob): one topology.volcano.sh/v1alpha1 HyperNode per
domain of `domains`, tier numbered from 1 (the lowest, whose members are the nodes carrying
the tier's label value) up to the top, whose members are the HyperNodes nested under it
(exactMatch by name). A job's `networkTopology.highestTierAllowed` is checked against this
tree by the scheduler. Without `domains` nothing is rendered for Volcano (a warning says so).

Kueue: a kueue.x-k8s.io/v1beta2 Topology whose levels are the tiers' node labels from the
top down (Kueue lists the widest level first), and a ResourceFlavor of the same name with
the fabric's nodeLabels and `topologyName` — the flavor tenants' quotas are in when they
name none (instead of the label-less default-flavor). Kueue reads the domains from the
nodes' labels, so `domains` is not needed there.
"""

from __future__ import annotations

from typing import Any

from trainops.manifest.cluster import ClusterTopology
from trainops.render.names import common_labels

HYPERNODE_VERSION = "topology.volcano.sh/v1alpha1"
KUEUE_VERSION = "kueue.x-k8s.io/v1beta2"


def _labels(pipeline: str, extra: dict[str, str]) -> dict[str, str]:
    return common_labels(pipeline, run_id=None, component="topology", extra=extra)


def volcano_hypernodes(fabric: ClusterTopology, pipeline: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """HyperNodes of the domain tree, top tier first, each tier's domains in manifest order."""
    meta = _labels(pipeline, labels)
    out: list[dict[str, Any]] = []

    def walk(tree: dict[str, Any], tier: int) -> None:
        for name, sub in tree.items():
            level = fabric.tiers[tier - 1]
            if tier == 1:
                selector = {"labelMatch": {"matchLabels": {level.node_label: name}}}
                members = [{"type": "Node", "selector": selector}]
            else:
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}} for child in sub or {}]
            spec = {"tier": tier, "tierName": level.name, "members": members}
            out.append(
                {
                    "apiVersion": HYPERNODE_VERSION,
                    "kind": "HyperNode",
                    "metadata": {"name": name, "labels": meta},
                    "spec": spec,
                }
            )
            if tier > 1:
                walk(sub or {}, tier - 1)

    walk(fabric.domains, len(fabric.tiers))
    return out


def kueue_topology(fabric: ClusterTopology, pipeline: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The Topology (levels from the top tier down) and its ResourceFlavor."""
    meta = _labels(pipeline, labels)
    levels = [{"nodeLabel": tier.node_label} for tier in reversed(fabric.tiers)]
    flavor_spec: dict[str, Any] = {"nodeLabels": dict(fabric.node_labels), "topologyName": fabric.name}
    return [
        {
            "apiVersion": KUEUE_VERSION,
            "kind": "Topology",
            "metadata": {"name": fabric.name, "labels": meta},
            "spec": {"levels": levels},
        },
        {
            "apiVersion": KUEUE_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": fabric.name, "labels": meta},
            "spec": flavor_spec,
        },
    ]


def kueue_level(fabric: ClusterTopology | None, *, level: str | None, highest_tier: int | None) -> str | None:
    """The node label Kueue places a job inside: train.topology.level, else the label of its highest tier."""
    if level:
        return level
    if fabric is not None and highest_tier is not None:
        return fabric.tier_label(highest_tier)
    return None
