"""The lineage graph of an artifact, read from the index: the same walk as
trainops.registry.lineage (parents from each artifact's lineage and OCI subject, pruned
artifacts known from their records, unknown parents marked missing), both directions at
once, plus a node for each git commit an artifact was built from. With a manifest whose
spec.rollout is set, `add_rollouts` adds below each release the rollout commits that served
it (text nodes: commit, action, step and weight), read from the GitOps history by
trainops.rollout.lineage, as `trainops lineage --down` reads them."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import deque
from typing import TYPE_CHECKING

from trainops.errors import TrainopsError
from trainops.registry.lineage import Graph, Node
from trainops.rollout.lineage import add_rollouts as served_by
from trainops.ui.models import GraphEdge, GraphNode, LineageGraph
from trainops.ui.queries import DIGEST, TAG_OF, artifact_row

if TYPE_CHECKING:
    from trainops.manifest import Manifest

log = logging.getLogger(__name__)
MAX_NODES = 400


def _node(db: sqlite3.Connection, digest: str) -> GraphNode:
    row = db.execute(
        f"""SELECT a.kind, a.step, a.metrics, a.git_commit, a.pruned, r.url, {TAG_OF} AS tag
           FROM artifacts a JOIN repos r ON r.id = a.repo_id WHERE a.digest = ? ORDER BY a.pruned, r.url LIMIT 1""",
        (digest,),
    ).fetchone()
    if row is None:
        return GraphNode(id=digest, kind="unknown", label=f"missing {digest[7:19]}", missing=True)
    name = row["url"].rsplit("/", 1)[-1]
    label = f"{row['kind']} {name}:{row['tag']}" if row["tag"] else f"{row['kind']} {name}@{digest[7:19]}"
    if row["step"] is not None and str(row["step"]) not in label:
        label += f" step {row['step']}"
    return GraphNode(
        id=digest,
        kind=row["kind"],
        label=label + (" (pruned)" if row["pruned"] else ""),
        repository=row["url"],
        tag=row["tag"],
        step=row["step"],
        metrics=json.loads(row["metrics"]),
        git_commit=row["git_commit"],
        pruned=bool(row["pruned"]),
    )


def _neighbours(db: sqlite3.Connection, digest: str, up: bool) -> list[tuple[str, str, str]]:
    """(child, parent, relation) edges leading up (to parents) or down (to children) of digest."""
    column = "child" if up else "parent"
    rows = db.execute(f"SELECT DISTINCT child, parent, relation FROM edges WHERE {column} = ? ORDER BY 1, 2", (digest,))
    return [(r["child"], r["parent"], r["relation"]) for r in rows]


def _inherited_images(edges: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Image edges a parent already draws: a run's checkpoints all ran in its image, so only
    the first one (whose parents did not) links to it; the others reach it through it."""
    images = {(c, p) for c, p, r in edges if r == "image"}
    inherited = set()
    for child, image in images:
        parents = [p for c, p, r in edges if c == child and r != "image"]
        if any((parent, image) in images for parent in parents):
            inherited.add((child, image, "image"))
    return inherited


def _add_commits(nodes: dict[str, GraphNode], edges: set[tuple[str, str, str]]) -> None:
    """A node per git commit, linked from the first artifacts built from it: those with no
    parent in the graph from the same commit (the rest reach it through their parents)."""
    for node in list(nodes.values()):
        if not node.git_commit:
            continue
        parents = [nodes[p] for c, p, _ in edges if c == node.id and p in nodes]
        if any(p.git_commit == node.git_commit for p in parents):
            continue
        commit = f"git:{node.git_commit}"
        nodes.setdefault(commit, GraphNode(id=commit, kind="git", label=f"git {node.git_commit[:12]}"))
        edges.add((node.id, commit, "built-from"))


def lineage(db: sqlite3.Connection, *, digest: str, repository: str | None = None) -> LineageGraph:
    """Ancestors and descendants of an artifact, as far as MAX_NODES nodes."""
    artifact_row(db, digest, repository)  # must exist
    nodes: dict[str, GraphNode] = {digest: _node(db, digest)}
    edges: set[tuple[str, str, str]] = set()
    for up in (True, False):
        queue = deque([digest])
        seen = {digest}
        while queue and len(nodes) < MAX_NODES:
            current = queue.popleft()
            for child, parent, relation in _neighbours(db, current, up):
                edges.add((child, parent, relation))
                other = parent if up else child
                if other not in nodes:
                    nodes[other] = _node(db, other)
                if other not in seen and DIGEST.match(other):
                    seen.add(other)
                    queue.append(other)
    edges -= _inherited_images(edges)
    _add_commits(nodes, edges)
    kept = [GraphEdge(child=c, parent=p, relation=r) for c, p, r in sorted(edges) if c in nodes and p in nodes]
    return LineageGraph(root=digest, nodes=list(nodes.values()), edges=kept)


def add_rollouts(found: LineageGraph, *, manifest: Manifest) -> LineageGraph:
    """The graph plus a node per rollout commit that served one of its releases (model
    artifacts), linked to each release it served; unchanged when the manifest sets no
    rollout, or (logged) when the GitOps history cannot be read."""

    releases = {n.id: Node(digest=n.id, ref=n.label, kind=n.kind) for n in found.nodes if n.kind == "model"}
    served = Graph(root=found.root, direction="down", nodes=releases)
    try:
        if served_by(served, manifest) == 0:
            return found
    except TrainopsError as err:
        log.warning("cannot read the rollouts of %s: %s", manifest.pipeline.metadata.name, err)
        return found
    nodes = {n.id: n for n in found.nodes}
    edges = list(found.edges)
    for edge in served.edges:
        commit = served.nodes[edge.child].git_commit or edge.child
        served_as = edge.relation.removesuffix(" (as stable)")  # action, step and weight
        nodes.setdefault(
            edge.child,
            GraphNode(id=edge.child, kind="rollout", label=f"rollout {commit[:12]} {served_as}", git_commit=commit),
        )
        edges.append(GraphEdge(child=edge.child, parent=edge.parent, relation=edge.relation))
    return LineageGraph(root=found.root, nodes=list(nodes.values()), edges=edges)
