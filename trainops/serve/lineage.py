"""Lineage reaches serving: the rollout commits of the GitOps repo that served a release.

A release's lineage (trainops.registry.lineage) ends at the model artifact; its serving
history lives in the GitOps repo, in the Trainops-Release trailers of the rollout commits.
`lineage_with_rollouts` walks the registry graph and adds, below every model in it, a
node per rollout commit that served that model (key `commit:<sha>`, kind `rollout`),
linked by the action and step (`promote 2/3 50%`) — as the release the commit moved
traffic to (Trainops-Release), or as the stable release serving the rest during another
release's canary (Trainops-Stable, marked `(as stable)`).
"""

from __future__ import annotations

from trainops.registry.context import Registries
from trainops.registry.lineage import Direction, Edge, Graph, Node, lineage_graph
from trainops.registry.reference import Reference, RegistryRoot
from trainops.spec import Manifest

KEY_PREFIX = "commit:"  # as long as "sha256:", so labels show the commit's first 12 characters


def add_rollouts(graph: Graph, manifest: Manifest, *, limit: int = 1000) -> int:
    """Add the rollout commits that served the graph's models; how many were added."""
    from trainops.serve.audit import rollout_history
    from trainops.serve.render import serving_path

    models = {digest for digest, node in graph.nodes.items() if node.kind == "model"}
    if not models or manifest.pipeline.spec.rollout is None:
        return 0
    path = serving_path(manifest)
    added = 0
    for item in reversed(rollout_history(manifest, limit=limit)):  # oldest first
        roles = ((item.release, ""), (item.stable, " (as stable)"))
        for release, role in roles:
            digest = release.rsplit("@", 1)[1] if release and "@" in release else None
            if digest not in models:
                continue
            key = KEY_PREFIX + item.commit
            ref = f"{path}@{item.commit[:12]}"
            graph.nodes[key] = Node(digest=key, ref=ref, kind="rollout", created=item.date, git_commit=item.commit)
            graph.edges.append(Edge(key, digest, f"{item.action} {item.step}{role}"))
            added += 1
    return added


def lineage_with_rollouts(
    registries: Registries,
    manifest: Manifest,
    *,
    ref: Reference,
    direction: Direction = "down",
    scan: RegistryRoot | None = None,
) -> Graph:
    """lineage_graph, plus (walking down) the rollout commits that served each model in it."""
    graph = lineage_graph(registries, ref=ref, direction=direction, scan=scan)
    if direction in ("down", "both"):
        add_rollouts(graph, manifest)
    return graph
