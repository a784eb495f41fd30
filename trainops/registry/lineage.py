"""The lineage graph: walk up (what an artifact came from) or down (what came from it).

Lineage lives in the artifacts themselves (the `dev.trainops.lineage` annotation and the
OCI `subject` of records such as eval reports), so the graph is rebuilt from any backend.
Walking down needs every artifact of the registry: manifests are read once and cached on
disk by digest (they are immutable), so later walks cost a listing.
"""

from __future__ import annotations

import json
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from trainops.errors import InputError, NotFoundError, UsageError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.digestcache import cache_dir
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference, RegistryRoot
from trainops.registry.retention import tombstone
from trainops.registry.store import resolve
from trainops.units import fold_reference

Direction = Literal["up", "down", "both"]
COMMIT_KEY = "git:"  # the key of a git commit's node: git:<40 hex>
_COMMIT_HINT = "check the commit (`git log`), and the registry (--registry) its artifacts were pushed to"


@dataclass
class Node:
    digest: str
    ref: str
    kind: str
    created: str | None = None
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    git_commit: str | None = None
    missing: bool = False  # named as a parent but not found
    pruned: bool = False  # deleted (by retention); known from its pruned record


@dataclass(frozen=True)
class Edge:
    child: str
    parent: str
    relation: str


@dataclass
class Graph:
    root: str
    direction: Direction
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    note: str | None = None  # how the walk started, when not where it was asked to (said to people)

    def to_data(self) -> GraphData:
        """The graph as JSON: its nodes as a list (`trainops.serialize`)."""
        return GraphData(self.root, self.direction, list(self.nodes.values()), list(self.edges), self.note)


@dataclass(frozen=True)
class GraphData:
    """What `lineage -o json` prints."""

    root: str
    direction: Direction
    nodes: list[Node]
    edges: list[Edge]
    note: str | None = None


def _cached_manifest(registries: Registries, ref: Reference, digest: str) -> ManifestData:
    path = cache_dir() / "manifests" / digest[7:]
    try:
        data = path.read_bytes()
        if sha256_digest(data) == digest:
            return ManifestData(data, json.loads(data).get("mediaType", ""), digest)
    except (OSError, ValueError):
        pass
    manifest = registries.backend(ref).get_manifest(ref.repository, digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(manifest.data)
        tmp.replace(path)
    except OSError:
        pass
    return manifest


def forget_manifest(digest: str) -> None:
    """A manifest trainops deleted leaves the cache: a walk must not find it there as present."""
    with suppress(OSError):
        (cache_dir() / "manifests" / digest[7:]).unlink(missing_ok=True)


def _parse(registries: Registries, ref: Reference, manifest: ManifestData) -> ParsedManifest:
    """Parse a manifest; an image an engine pushed keeps its lineage in its config's labels
    (engines cannot annotate manifests), so read those into the annotations."""
    parsed = parse_manifest(manifest)
    if parsed.kind != "image" or media.A_LINEAGE in parsed.annotations or parsed.config is None:
        return parsed
    if parsed.config.size > 4 * 1024 * 1024:
        return parsed
    try:
        with registries.backend(ref).open_blob(ref.repository, parsed.config.digest) as fh:
            config = json.loads(fh.read())
    except (NotFoundError, ValueError, OSError):
        return parsed
    labels = (config.get("config") or {}).get("Labels") or {}
    found = {k: str(labels[k]) for k in (media.A_LINEAGE, media.A_CREATED, media.A_REVISION) if k in labels}
    return replace(parsed, annotations={**found, **parsed.annotations}) if found else parsed


def parse_artifact(registries: Registries, ref: Reference, manifest: ManifestData) -> ParsedManifest:
    """A manifest parsed as the lineage walk reads it (an image's lineage from its config labels)."""
    return _parse(registries, ref, manifest)


def _node(parsed: ParsedManifest, shown: str, *, pruned: bool = False, lineage: Lineage | None = None) -> Node:
    lineage = parsed.lineage() if lineage is None else lineage
    return Node(
        digest=parsed.digest,
        ref=shown,
        kind=parsed.kind,
        created=parsed.created,
        step=lineage.step,
        metrics=dict(lineage.metrics),
        git_commit=lineage.git_commit or parsed.annotations.get(media.A_REVISION),  # an image: its revision
        pruned=pruned,
    )


def _parents(parsed: ParsedManifest, lineage: Lineage | None = None) -> list[tuple[str, str, str]]:
    """(digest, ref text, relation) of everything this artifact names as its origin."""
    lineage = parsed.lineage() if lineage is None else lineage
    out: list[tuple[str, str, str]] = [(p.digest, p.ref, p.relation) for p in lineage.parents]
    if parsed.subject is not None and parsed.subject.digest not in {digest for digest, _, _ in out}:
        out.append((parsed.subject.digest, "", "describes"))  # unless its lineage names it already
    return out


def _parent_ref(registries: Registries, child: Reference, text: str, digest: str) -> Reference:
    """Where a parent lives: its recorded reference, or (when that names no registry we can
    complete, or there is none) the child's own repository, by digest."""

    if text:
        try:
            return registries.ref(text).with_tag(None).with_digest(digest)
        except (InputError, UsageError):  # malformed, or short with no registry to complete it
            pass
    return child.with_tag(None).with_digest(digest)


def _walk_up(registries: Registries, graph: Graph, start: Reference, parsed: ParsedManifest) -> None:
    queue: deque[tuple[Reference, ParsedManifest, Lineage]] = deque([(start, parsed, parsed.lineage())])
    while queue:
        ref, current, lineage = queue.popleft()
        for digest, text, relation in _parents(current, lineage):
            graph.edges.append(Edge(current.digest, digest, relation))
            if digest in graph.nodes:
                continue
            parent_ref = _parent_ref(registries, ref, text, digest)
            try:
                manifest = _cached_manifest(registries, parent_ref, digest)
            except NotFoundError:
                record = tombstone.read_record(registries, repository=parent_ref.with_digest(None), digest=digest)
                if record is None:
                    graph.nodes[digest] = Node(digest, text or parent_ref.repo_url, "unknown", missing=True)
                    continue
                known = record.lineage()
                graph.nodes[digest] = _node(record, text or parent_ref.repo_url, pruned=True, lineage=known)
                queue.append((parent_ref, record, known))  # the pruned one's parents are still known
                continue
            found = _parse(registries, parent_ref, manifest)
            known = found.lineage()
            graph.nodes[digest] = _node(found, text or parent_ref.repo_url, lineage=known)
            queue.append((parent_ref, found, known))


def scan_registry(
    registries: Registries, root: RegistryRoot, *, pruned_as_originals: bool = False
) -> list[tuple[Reference, ParsedManifest, str]]:
    """Every manifest in every repository under root: (repo ref, parsed, shown name).

    With pruned_as_originals, a pruned record stands for the artifact it records (its
    digest and lineage), as a lineage walk wants; gc wants the record itself.
    """

    lister = open_backend(root, insecure=registries.insecure, insecure_registries=registries.insecure_registries)
    try:
        repos = lister.list_repositories()
    finally:
        lister.close()
    found: list[tuple[Reference, ParsedManifest, str]] = []
    for repo in repos:
        ref = Reference(root.scheme, root.location, repo)
        backend = registries.backend(ref)
        tags: dict[str, str] = {}
        try:
            targets = backend.tag_targets(repo)
            if targets is None:  # one manifest read per tag on this backend
                targets = {name: backend.get_manifest(repo, name).digest for name in backend.list_tags(repo)}
            for name in sorted(targets):
                tags.setdefault(targets[name], name)
            digests = backend.list_manifests(repo)
        except NotFoundError:
            continue
        for digest in digests:
            try:
                parsed = _parse(registries, ref, _cached_manifest(registries, ref, digest))
            except NotFoundError:
                continue
            pruned = tombstone.as_pruned(parsed) if pruned_as_originals else None
            if pruned is not None:  # a deleted artifact: it stands in the graph as itself
                shown = parsed.annotations.get(tombstone.A_NAME) or f"{ref.repo_url}@{pruned.digest[:19]}"
                found.append((ref, pruned, shown))
                continue
            shown = ref.repo_url + (f":{tags[digest]}" if digest in tags else f"@{digest[:19]}")
            found.append((ref, parsed, shown))
    return found


@dataclass
class DownIndex:
    """One registry scan, indexed for walking down: every artifact's node (a pruned one as
    itself, marked), and the children that name each digest as their parent."""

    nodes: dict[str, Node]
    children: dict[str, list[tuple[str, str]]]
    commits: dict[str, str]  # digest → the git commit it records (gitCommit, else an image's revision)
    repos: dict[str, str]  # digest → the git repository it records

    @classmethod
    def scan(cls, registries: Registries, root: RegistryRoot, *, records: bool = False) -> DownIndex:
        """records: also the stage records of `trainops run` (bookkeeping, left out by default)."""
        index = cls({}, {}, {}, {})
        for _, parsed, shown in scan_registry(registries, root, pruned_as_originals=True):
            if parsed.digest in index.nodes or (not records and media.A_STAGE_KEY in parsed.annotations):
                continue
            pruned = tombstone.A_DIGEST in parsed.annotations
            lineage = parsed.lineage()
            node = index.nodes[parsed.digest] = _node(parsed, shown, pruned=pruned, lineage=lineage)
            if node.git_commit:
                index.commits[parsed.digest] = node.git_commit
            if lineage.git_repo:
                index.repos[parsed.digest] = lineage.git_repo
            parents = _parents(parsed, lineage)
            if lineage.image_digest and lineage.image_digest not in {digest for digest, _, _ in parents}:
                parents.append((lineage.image_digest, "", "image"))  # trained or evaluated in that image
            for digest, _text, relation in parents:
                index.children.setdefault(digest, []).append((parsed.digest, relation))
        return index

    def from_commit(self, commit: str, *, where: str = "the registry") -> Graph:
        """The graph down from a git commit (full, or a hex prefix): its root is the commit,
        linked to the artifacts recording it that no other such artifact leads to."""
        matches = {d: c for d, c in self.commits.items() if c.removesuffix("-dirty").startswith(commit)}
        full = sorted({c.removesuffix("-dirty") for c in matches.values()})
        if not full:
            raise NotFoundError(f"no artifact in {where} records git commit {commit[:12]}", hint=_COMMIT_HINT)
        if len(full) > 1:
            raise InputError(
                f"git commit {commit} is ambiguous: {', '.join(c[:12] for c in full[:5])} are recorded",
                hint="give more of its hex digits",
            )
        key = COMMIT_KEY + full[0]
        repo = next((self.repos[d] for d in sorted(matches) if d in self.repos), "(no remote)")
        graph = Graph(root=key, direction="down")
        graph.nodes[key] = Node(digest=key, ref=repo, kind="commit", git_commit=full[0])
        below = self._descendants(list(matches))
        for digest in sorted(set(matches) - below):
            dirty = " (dirty tree)" if matches[digest].endswith("-dirty") else ""
            graph.edges.append(Edge(digest, key, "built-from" + dirty))
            graph.nodes[digest] = self.nodes[digest]
        self.walk(graph, sorted(set(matches) - below))
        return graph

    def _descendants(self, starts: list[str]) -> set[str]:
        found: set[str] = set()
        queue = deque(starts)
        while queue:
            for child, _ in self.children.get(queue.popleft(), []):
                if child not in found:
                    found.add(child)
                    queue.append(child)
        return found

    def walk(self, graph: Graph, starts: list[str]) -> None:
        """Add every descendant of starts (breadth first) to graph, with its edges."""
        queue = deque(starts)
        seen = set(starts)
        while queue:
            current = queue.popleft()
            for child, relation in sorted(self.children.get(current, [])):
                graph.edges.append(Edge(child, current, relation))
                graph.nodes.setdefault(child, self.nodes[child])
                if child not in seen:
                    seen.add(child)
                    queue.append(child)


def _scan_root(registries: Registries, ref: Reference) -> RegistryRoot:
    if registries.default_registry:
        root = registries.root()
        if (root.scheme, root.location) == (ref.scheme, ref.location):
            return root
    if ref.scheme == "file":
        return RegistryRoot("file", "", str(Path(ref.repository).parent))
    return RegistryRoot(ref.scheme, ref.location, "")


def lineage_graph(
    registries: Registries,
    *,
    ref: Reference,
    direction: Direction = "up",
    scan: RegistryRoot | None = None,
    records: bool = False,
) -> Graph:
    """The lineage of ref: its ancestors (up), descendants (down), or both (records: with the
    stage records of `trainops run` among the descendants)."""
    found = resolve(registries, ref=ref)
    graph = Graph(root=found.manifest.digest, direction=direction)
    root = _parse(registries, found.ref, found.manifest)
    graph.nodes[found.manifest.digest] = _node(root, str(found.ref.with_digest(None)))
    if direction in ("up", "both"):
        _walk_up(registries, graph, found.ref, root)
    if direction in ("down", "both"):
        index = DownIndex.scan(registries, scan or _scan_root(registries, found.ref), records=records)
        index.walk(graph, [found.manifest.digest])
    return graph


# -- formats -------------------------------------------------------------------------------


def _label(node: Node, *, metrics: bool = True) -> str:
    bits = [node.kind, node.ref]
    if node.step is not None:
        bits.append(f"step {node.step}")
    if metrics:
        bits.extend(_metrics(node))
    if node.missing:
        bits.append("(missing)")
    if node.pruned:
        bits.append("(pruned)")
    return " ".join(bits) + f" [{_hex12(node.digest)}]"


def _metrics(node: Node) -> list[str]:
    return [f"{k}={v:g}" for k, v in sorted(node.metrics.items())]


_NARROWEST = 24  # a deep tree's labels still get this many columns, past the width if need be


def _entry(head: str, indent: str, node: Node, suffix: str, width: int | None) -> list[str]:
    """A node's lines in a tree: head + its label, on one line (width None), or folded to
    width between the parts of its reference, never mid-name, its metrics on lines of
    their own; continuation lines start with indent (the tree's guides, then spaces)."""
    if width is None:
        return [head + _label(node) + suffix]
    room = max(_NARROWEST, width - max(len(head), len(indent)))
    label = fold_reference(_label(node, metrics=False) + suffix, room).split("\n")
    metrics = fold_reference(" ".join(_metrics(node)), room).split("\n") if node.metrics else []
    return [head + label[0], *(indent + line for line in label[1:] + metrics)]


def _hex12(key: str) -> str:
    """The first 12 hex digits of a node's key: sha256:…, git:… (a commit) or commit:… (a rollout)."""
    return key.split(":", 1)[-1][:12]


# An edge's relation is what the parent is to the child (step-700 resumed-from step-600).
# Walking down, each line names the child from the parent, so it reads the other way.
_DOWNWARD = {
    "parent": "child",
    "resumed-from": "resumed-by",
    "derived-from": "derived-into",
    "dataset": "used-by",
    "image": "ran",
    "evaluated": "evaluated-by",
    "released-from": "released-as",
    "evaluated-by": "cleared",
    "built-from": "built",
    "describes": "described-by",
}


def downward(relation: str) -> str:
    """The label of an edge walked from parent to child (`resumed-from` → `resumed-by`)."""
    head, sep, rest = relation.partition(" ")
    return _DOWNWARD.get(head, head) + sep + rest


def to_tree(graph: Graph, *, width: int | None = None) -> str:
    """An indented text tree from the root, following the chosen direction; each line names
    how the node on it relates to the one above (walking down, the relation reversed).

    With width, each node's label folds to fit it (see _entry); without, one line a node."""
    links: dict[str, list[tuple[str, str]]] = {}
    for edge in graph.edges:
        if graph.direction == "down":
            links.setdefault(edge.parent, []).append((edge.child, downward(edge.relation)))
        else:
            links.setdefault(edge.child, []).append((edge.parent, edge.relation))
    lines = _entry("", "  ", graph.nodes[graph.root], "", width)
    shown = {graph.root}  # a node reached twice (a release's checkpoint via its eval) is expanded once

    def walk(digest: str, prefix: str) -> None:
        items = links.get(digest, [])
        for i, (other, relation) in enumerate(items):
            last = i == len(items) - 1
            repeat = " (see above)" if other in shown else ""
            below = prefix + ("    " if last else "│   ")
            head = f"{prefix}{'└── ' if last else '├── '}{relation}: "
            lines.extend(_entry(head, below + " " * (len(relation) + 2), graph.nodes[other], repeat, width))
            if not repeat:
                shown.add(other)
                walk(other, below)

    walk(graph.root, "")
    return "\n".join(lines)


def _short(digest: str) -> str:
    return ("g" if digest.startswith(COMMIT_KEY) else "n") + _hex12(digest)


def to_mermaid(graph: Graph) -> str:
    lines = ["graph BT"]
    for node in graph.nodes.values():
        text = _label(node).replace('"', "'")
        lines.append(f'  {_short(node.digest)}["{text}"]')
    for edge in graph.edges:
        lines.append(f"  {_short(edge.child)} -->|{edge.relation}| {_short(edge.parent)}")
    return "\n".join(lines)


def to_dot(graph: Graph) -> str:
    lines = ["digraph lineage {", "  rankdir=BT;", "  node [shape=box];"]
    for node in graph.nodes.values():
        label = _label(node).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  "{node.digest}" [label="{label}"];')
    for edge in graph.edges:
        lines.append(f'  "{edge.child}" -> "{edge.parent}" [label="{edge.relation}"];')
    lines.append("}")
    return "\n".join(lines)
