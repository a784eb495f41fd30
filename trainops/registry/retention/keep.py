"""May this be deleted? The one home every deleting path asks.

`registry gc`, retention (`ckpt prune`, the checkpoint watcher) and `registry rm` each have
their own rule for what they would remove; none of them removes what this module keeps:

- a release the GitOps repository serves, as stable or as the canary (`served`, read from
  the manifest's GitOps repo by trainops.rollout.protect): never, whatever the flags;
- a tagged release (a model `trainops release` made): only with `--force --reason`
  (trainops.registry.retention.protect); one whose tags went that way is no longer kept for itself;
- what a kept artifact needs: its lineage parents (a pruned parent's record stands for
  it), its subject, the manifests of an index, the eval report a release names, and its
  referrers (eval reports, signatures, provenance).

Retention is the one narrowing: it removes old checkpoints that newer checkpoints name as
parents (a pruned record keeps that lineage walkable), so for it a checkpoint's own
parents do not count; a checkpoint a release (or any other kept artifact) came from does.

Every decision comes with its reason, said by the command that kept the artifact.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainops.errors import ExistsError, TrainopsError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest
from trainops.registry.context import Registries
from trainops.registry.lineage import scan_registry
from trainops.registry.reference import Reference, RegistryRoot, parse_reference
from trainops.registry.retention import tombstone
from trainops.registry.retention.protect import FORCE_HINT, Override, is_release

SERVED_HINT = "serve another release first (trainops rollout start/promote, or rollback), then remove it"


@dataclass(frozen=True)
class Kept:
    """An artifact a deleting path would have removed, and why it stays."""

    artifact: str  # repo_url:tag or repo_url@digest
    reason: str


@dataclass(frozen=True)
class Served:
    """A release the GitOps repository serves: (repo_url, digest) → e.g. "served as stable
    by the GitOps repo (commit 45ba2c3adfdd in clusters/dev-serve)"."""

    releases: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def reason(self, repo_url: str, digest: str) -> str | None:
        return self.releases.get((repo_url, digest))


@dataclass(frozen=True)
class Guard:
    """What no deleting path removes beyond its own rule: served releases, releases (unless
    overridden), and what those need."""

    served: Served = field(default_factory=Served)
    override: Override | None = None

    def own_reason(self, repo_url: str, parsed: ParsedManifest, *, tagged: bool = True) -> str | None:
        """Why this artifact itself is kept (not for what needs it), or None. A release is
        kept by its tags: one whose tags went (`rm --force --reason`) is not kept for itself."""
        served = self.served.reason(repo_url, parsed.digest)
        if served is not None:
            return served
        if self.override is None and tagged and is_release(parsed):
            return "a release (--force --reason TEXT to remove it)"
        return None

    def check_remove(self, what: str, repo_url: str, parsed: ParsedManifest) -> None:
        """Before `what` is removed on request (`registry rm`): refused, exit 5, when served
        (whatever the flags) or a release without an override."""
        served = self.served.reason(repo_url, parsed.digest)
        if served is not None:
            raise ExistsError(f"{what} is {served}; it cannot be removed", hint=SERVED_HINT)
        if self.override is None and is_release(parsed):
            raise ExistsError(f"{what} is a release; refusing to remove it", hint=FORCE_HINT)


Scanned = Iterable[tuple[Reference, ParsedManifest, str]]
Node = tuple[str, str]  # (repo_url, digest): the same digest in two repositories is two artifacts


@dataclass
class Graph:
    """The manifests of a registry scan, indexed for the walk from the kept ones."""

    nodes: dict[Node, tuple[Reference, ParsedManifest, str]] = field(default_factory=dict)
    places: dict[str, list[str]] = field(default_factory=dict)  # digest → the repositories holding it
    records: dict[Node, str] = field(default_factory=dict)  # a pruned artifact → its record (same repository)
    referrers: dict[Node, list[str]] = field(default_factory=dict)  # subject → referrers (same repository)

    @classmethod
    def of(cls, scanned: Scanned) -> Graph:
        graph = cls()
        for ref, parsed, shown in scanned:
            here = ref.repo_url
            graph.nodes.setdefault((here, parsed.digest), (ref, parsed, shown))
            graph.places.setdefault(parsed.digest, []).append(here)
            pruned = parsed.annotations.get(tombstone.A_DIGEST)
            if pruned:
                graph.records.setdefault((here, pruned), parsed.digest)
            if parsed.subject is not None:
                graph.referrers.setdefault((here, parsed.subject.digest), []).append(parsed.digest)
        return graph

    def name(self, node: Node) -> str:
        entry = self.nodes.get(node)
        return entry[2] if entry else f"{node[0]}@{node[1][:19]}"

    def tagged(self, node: Node) -> bool:
        """Whether a scan's shown name (repo_url:tag, else repo_url@sha256:…) names a tag."""
        return "@" not in self.name(node).rsplit("/", 1)[-1]

    def _in(self, repo_url: str | None, digest: str) -> list[Node]:
        """The artifact digest in repo_url; where it is, when the repository is not known."""
        if repo_url is not None:
            return [(repo_url, digest)]
        return [(place, digest) for place in self.places.get(digest, [])]

    def needs(self, node: Node, *, through_checkpoints: bool) -> list[tuple[Node, str]]:
        """(artifact, edge) for what the artifact `node` needs."""
        here = node[0]
        found: list[tuple[Node, str]] = [((here, d), "a referrer") for d in self.referrers.get(node, [])]
        if node in self.records:
            found.append(((here, self.records[node]), "the pruned record"))
        entry = self.nodes.get(node)
        if entry is None:
            return found
        parsed = tombstone.as_pruned(entry[1]) or entry[1]  # a record stands for the pruned artifact's lineage
        if through_checkpoints or parsed.kind != "checkpoint":
            for parent in parsed.lineage().parents:
                found += [(n, "a lineage parent") for n in self._in(_repo_of(parent.ref), parent.digest)]
        found += [((here, c.digest), "a manifest of the index") for c in parsed.children]
        if parsed.subject is not None:
            found.append(((here, parsed.subject.digest), "the subject"))
        report = _parse(parsed.annotations.get(media.A_RELEASE_EVAL, ""))
        if report is not None and report.digest:
            found.append(((report.repo_url, report.digest), "the eval report"))
        return found


def _parse(reference: str) -> Reference | None:
    if "://" not in reference:
        return None
    try:
        return parse_reference(reference)
    except TrainopsError:
        return None


def _repo_of(reference: str) -> str | None:
    parsed = _parse(reference)
    return parsed.repo_url if parsed is not None else None


def needed(
    graph: Graph,
    roots: Mapping[Node, str | None],
    *,
    through_checkpoints: bool = True,
    already: Collection[Node] = (),
) -> dict[Node, str | None]:
    """Everything the roots need, transitively, less what is `already` kept: artifact → why
    (a root's own reason, else "<edge> of <name>", by the shortest way it was reached)."""
    kept: dict[Node, str | None] = {}
    queue = deque(roots.items())
    while queue:  # breadth first: each is explained by its nearest kept artifact
        node, reason = queue.popleft()
        if node in kept or node in already:
            continue
        kept[node] = reason
        for need, edge in graph.needs(node, through_checkpoints=through_checkpoints):
            queue.append((need, f"{edge} of {graph.name(node)}"))
    return kept


def guarded_roots(graph: Graph, guard: Guard) -> dict[Node, str]:
    """The artifacts the guard keeps for their own sake: artifact → reason."""
    roots: dict[Node, str] = {}
    for node, (_, parsed, _) in graph.nodes.items():
        reason = guard.own_reason(node[0], parsed, tagged=graph.tagged(node))
        if reason is not None:
            roots[node] = reason
    return roots


def kept_by_others(registries: Registries, root: RegistryRoot, candidates: Collection[Node]) -> dict[Node, str]:
    """Of the candidates (what retention would remove), those that something kept needs:
    every tagged artifact under root that is not a candidate nor bookkeeping (the stage
    records of `trainops run`), the releases, and what they need — a checkpoint's own
    parents aside. artifact → reason."""

    graph = Graph.of(scan_registry(registries, root))
    tagged: dict[Node, str | None] = {
        node: None
        for node, (_, parsed, _) in graph.nodes.items()
        if node not in candidates and graph.tagged(node) and media.A_STAGE_KEY not in parsed.annotations
    }
    reasons = needed(graph, {**tagged, **guarded_roots(graph, Guard())}, through_checkpoints=False)
    return {node: why for node, why in reasons.items() if node in candidates and why is not None}


def neighbourhood(registries: Registries, repository: Reference) -> RegistryRoot:
    """Where the artifacts that may need repository's live: the manifest's registry when
    repository is in it, else its registry (oci://, s3://) or its sibling layouts (file://)."""
    if registries.default_registry:
        root = registries.root()
        if root.scheme == repository.scheme and repository.repo_url.startswith(root.url.rstrip("/") + "/"):
            return root
    if repository.scheme == "file":
        return RegistryRoot("file", "", str(Path(repository.repository).parent))
    return repository.root
