"""spec.cluster: what a platform team declares once about its cluster (the network topology).

    cluster:
      topology:
        name: gpu-fabric                   # the Kueue Topology and its ResourceFlavor
        nodeLabels: {node.trainops.dev/pool: gpu}   # the nodes of the fabric (Kueue needs one)
        tiers:                             # tier 1 first: the closest, fastest domain
          - {name: rack, nodeLabel: topology.trainops.dev/rack}
          - {name: spine, nodeLabel: topology.trainops.dev/spine}
        domains:                           # the tree, top tier first (Volcano HyperNodes)
          spine-0: {rack-0: {}, rack-1: {}}
          spine-1: {rack-2: {}, rack-3: {}}

Tiers number like Volcano's HyperNode tiers (1 = the lowest), so `train.topology.
highestTierAllowed: 1` means "inside one rack" for both schedulers: Volcano reads it from
networkTopology, Kueue from the tier's node label. Kueue needs only the labels (it reads
the domains from the nodes); Volcano needs the tree, which `domains` gives: each key is a
value of its tier's node label, nested `depth = number of tiers`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator, model_validator

from trainops.manifest.common import Name, StrictModel

# a qualified label key (prefix/name), as Kubernetes and Kueue's Topology levels take it
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a label value that is also a HyperNode name


class TopologyTier(StrictModel):
    """One tier of the network: a name and the node label whose value names a node's domain."""

    name: Name = Field(description="The tier's name (rack, spine, block…); Volcano's tierName.")
    node_label: LabelKey = Field(description="Node label whose value is the node's domain in this tier.")


def _domain_depth(tree: Any, where: str) -> int:
    """How deep a domains tree is (every branch must be as deep); ValueError when malformed."""
    if not isinstance(tree, dict):
        raise ValueError(f"{where}: expected a mapping of domain names")
    if not tree:
        return 0
    depths = set()
    for key, sub in tree.items():
        if not isinstance(key, str) or len(key) > 63 or not _DOMAIN.match(key):
            raise ValueError(f"{where}: domain {key!r} must be a DNS-1123 label (it names a HyperNode)")
        depths.add(1 + _domain_depth(sub if sub is not None else {}, f"{where}.{key}"))
    if len(depths) > 1:
        raise ValueError(f"{where}: every branch must be as deep as the tiers")
    return depths.pop()


def domain_names(tree: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, sub in tree.items():
        out += [key, *domain_names(sub or {})]
    return out


class ClusterTopology(StrictModel):
    """The network topology: tiers by node label, and (for Volcano) the tree of domains."""

    name: Name = Field("default", description="Name of the Kueue Topology and of its ResourceFlavor.")
    node_labels: dict[LabelKey, str] = Field(
        default_factory=dict,
        max_length=8,
        description="Labels every node of the fabric has: the ResourceFlavor's nodeLabels (Kueue requires one).",
    )
    tiers: list[TopologyTier] = Field(min_length=1, max_length=16, description="Tier 1 (the closest) first.")
    domains: dict[str, Any] = Field(
        default_factory=dict,
        description="Domains of the top tier, each holding those of the tier below (Volcano HyperNodes); "
        "without it no HyperNodes are rendered.",
    )

    @field_validator("domains")
    @classmethod
    def _domains_shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        _domain_depth(value, "domains")
        names = domain_names(value)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"domains: {', '.join(twice)} named twice (each names one HyperNode)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ClusterTopology:
        names = [t.name for t in self.tiers]
        labels = [t.node_label for t in self.tiers]
        if len(set(names)) != len(names) or len(set(labels)) != len(labels):
            raise ValueError("tiers: each tier needs its own name and node label")
        depth = _domain_depth(self.domains, "domains")
        if self.domains and depth != len(self.tiers):
            raise ValueError(f"domains are {depth} deep but there are {len(self.tiers)} tiers: nest one per tier")
        return self

    def tier_label(self, tier: int) -> str | None:
        """The node label of tier N (1 = the lowest), or None past the top."""
        return self.tiers[tier - 1].node_label if 1 <= tier <= len(self.tiers) else None


class ClusterSpec(StrictModel):
    """What the platform declares about the cluster trainops renders for."""

    topology: ClusterTopology | None = None
