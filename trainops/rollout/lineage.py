"""Lineage reaches serving: the rollout commits of the GitOps repo that served a release.

A release's lineage (trainops.registry.lineage) ends at the model artifact; its serving
history lives in the GitOps repo, in the Trainops-Release trailers of the rollout commits.
`lineage_with_rollouts` walks the registry graph and adds, below every model in it, a
node per rollout commit that served that model (key `commit:<sha>`, kind `rollout`),
linked by the action and step (`promote 2/3 50%`) — as the release the commit moved
traffic to (Trainops-Release), or as the stable release serving the rest during another
release's canary (Trainops-Stable, marked `(as stable)`).

With rollout.disaggregation a release serves through a pool: `pool_history` reads, from each
rollout commit's own tree, the InferencePool that routed to the release's prefill+decode pair,
the revision its selector names and the weight the HTTPRoute gave it, and the graph's edges say
them (`promote 2/3 50% · pool tiny-llm-canary 222222222222-abababab 50%`).

`lineage_from_commit` starts from a git commit of the training code instead (`trainops
lineage git:REV`): commit → image → checkpoints → eval reports → releases → rollouts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops.errors import InputError, NotFoundError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.lineage import Direction, DownIndex, Edge, Graph, Node, lineage_graph
from trainops.registry.reference import Reference, RegistryRoot, parse_reference
from trainops.rollout.context import LABEL_TRACK, serve_context
from trainops.rollout.state import STATE_FILE, parse_state

GIT_PREFIX = "git:"  # `trainops lineage git:REV`
_HEX = re.compile(r"^[0-9a-f]{7,64}$")
_REV = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@{}~^+-]{0,254}$")
KEY_PREFIX = "commit:"  # as long as "sha256:", so labels show the commit's first 12 characters


@dataclass(frozen=True)
class PoolServed:
    """One rollout commit's pool for a release: which pool, which revision of the pair, what weight."""

    commit: str
    date: str
    action: str
    step: str
    pool: str
    revision: str
    weight: int


def _pool_at(files: dict[str, bytes], pool: str) -> tuple[str, str, int] | None:
    """(pool, revision, weight) of the pool `<name>-<track>` in a committed serving tree (KServe's
    pool of the track's LLMInferenceService where trainops renders none), None when there is none."""

    from trainops.rollout.disagg import LABEL_REVISION  # lazy: loads ssl, socketserver

    def docs(name: str) -> list[dict[str, Any]]:
        text = files.get(name)
        return [d for d in yaml.safe_load_all(text.decode("utf-8")) if isinstance(d, dict)] if text else []

    pools = {d["metadata"]["name"]: d for d in docs("inferencepool.yaml") if d.get("kind") == "InferencePool"}
    if pool in pools:
        revision = str(pools[pool]["spec"]["selector"]["matchLabels"].get(LABEL_REVISION, "-"))
    else:  # KServe's LLMInferenceService of the track: its pool is KServe's, named after it
        from trainops.rollout.disagg import KSERVE_POOL_SUFFIX  # lazy: loads ssl, socketserver

        track = pool.rsplit("-", 1)[1]
        found = [d for d in docs("llminferenceservice.yaml") if d["metadata"]["labels"].get(LABEL_TRACK) == track]
        if not found:
            return None
        pool = found[0]["metadata"]["name"] + KSERVE_POOL_SUFFIX
        revision = str(found[0]["metadata"]["labels"].get(LABEL_REVISION, "-"))
    weight = 0
    for route in docs("httproute.yaml"):
        rules = route["spec"].get("rules") or []
        if rules:  # the last rule splits by weight; those before it are A/B header matches
            weight = sum(int(b.get("weight", 1)) for b in rules[-1].get("backendRefs", []) if b.get("name") == pool)
    return pool, revision, weight


def pool_history(manifest: Manifest, digest: str, *, limit: int = 1000) -> list[PoolServed]:
    """The pools that served the release `digest` (a model's), oldest first, read from each rollout
    commit's tree; [] unless the rollout is disaggregated."""
    from trainops.gitops import read_tree  # lazy: loads subprocess
    from trainops.rollout.audit import rollout_history  # lazy: loads ssl, socketserver
    from trainops.rollout.flows import gitops_repo  # lazy: loads ssl, socketserver

    rollout = manifest.pipeline.spec.rollout
    if rollout is None or rollout.disaggregation is None:
        return []
    ctx = serve_context(manifest)
    repo = gitops_repo(manifest)
    out = []
    for item in reversed(rollout_history(manifest, limit=limit)):
        named = [r for r in (item.release, item.stable) if r and "@" in r and parse_reference(r).digest == digest]
        if not named:
            continue
        files = read_tree(repo=repo.url, branch=repo.branch, path=repo.path, commit=item.commit).files
        state = parse_state(files.get(STATE_FILE))
        tracks = (("stable", state.stable), ("canary", state.canary))
        for track, served in tracks:
            if served is None or served.digest != digest:
                continue
            found = _pool_at(files, f"{ctx.name}-{track}")
            if found is not None:
                out.append(PoolServed(item.commit, item.date, item.action, item.step, *found))
    return out


def add_rollouts(graph: Graph, manifest: Manifest, *, limit: int = 1000) -> int:
    """Add the rollout commits that served the graph's models; how many were added."""
    from trainops.rollout.audit import rollout_history  # lazy: loads ssl, socketserver
    from trainops.rollout.render import serving_path  # lazy: loads ssl, socketserver

    models = {digest for digest, node in graph.nodes.items() if node.kind == "model"}
    if not models or manifest.pipeline.spec.rollout is None:
        return 0
    path = serving_path(manifest)
    pools = {(p.commit, digest): p for digest in models for p in pool_history(manifest, digest, limit=limit)}
    added = 0
    for item in reversed(rollout_history(manifest, limit=limit)):  # oldest first
        roles = ((item.release, ""), (item.stable, " (as stable)"))
        for release, role in roles:
            digest = parse_reference(release).digest if release else None
            if digest not in models:
                continue
            key = KEY_PREFIX + item.commit
            ref = f"{path}@{item.commit[:12]}"
            graph.nodes[key] = Node(digest=key, ref=ref, kind="rollout", created=item.date, git_commit=item.commit)
            via = pools.get((item.commit, digest))
            pool = f" · pool {via.pool} {via.revision} {via.weight}%" if via else ""
            graph.edges.append(Edge(key, digest, f"{item.action} {item.step}{role}{pool}"))
            added += 1
    return added


def lineage_with_rollouts(
    registries: Registries,
    manifest: Manifest,
    *,
    ref: Reference,
    direction: Direction = "down",
    scan: RegistryRoot | None = None,
    records: bool = False,
) -> Graph:
    """lineage_graph, plus (walking down) the rollout commits that served each model in it."""
    graph = lineage_graph(registries, ref=ref, direction=direction, scan=scan, records=records)
    if direction in ("down", "both"):
        add_rollouts(graph, manifest)
    return graph


def commit_of(rev: str, *, repo_dir: Path) -> str:
    """The commit `git:REV` names: its full sha where git knows it (in the repository holding
    repo_dir), else a hex rev as given (the registry is searched by that prefix: the artifacts
    may come from a clone this one has not fetched)."""
    if not _REV.match(rev) or ".." in rev:
        raise InputError(
            f"{GIT_PREFIX}{rev} is not a git revision",
            hint="give git:<sha> (7 to 40 hex digits), git:HEAD, or git:<branch or tag>",
        )
    from trainops.gitinfo import resolve_commit  # lazy: loads subprocess

    full = resolve_commit(repo_dir, rev)
    if full:
        return full
    if _HEX.match(rev.lower()):
        return rev.lower()
    from trainops.gitinfo import in_repository  # lazy: loads subprocess

    if not in_repository(repo_dir):
        raise NotFoundError(
            f"{GIT_PREFIX}{rev}: {repo_dir} is not in a git repository",
            hint="run it in the training code's clone, or give the commit's sha (git:<7 to 40 hex digits>)",
        )
    raise NotFoundError(
        f"git revision {rev} is unknown in {repo_dir}",
        hint="check it with `git rev-parse`, or give the commit's sha",
    )


def lineage_from_commit(
    registries: Registries,
    manifest: Manifest | None,
    *,
    rev: str,
    repo_dir: Path,
    scan: RegistryRoot | None = None,
    records: bool = False,
    same_content: Callable[[str], Iterator[str]] | None = None,
) -> Graph:
    """What came from a git commit: the artifacts of the registry recording it (an image's
    revision, or gitCommit), everything below them, and the rollout commits that served its
    releases. One registry scan; a commit nothing came from is NotFoundError, unless
    same_content names earlier commits whose content it is (nothing trainops tracks
    changed since, nearest first): the walk starts at the first of them an artifact records,
    and the graph's note says so."""
    commit = commit_of(rev, repo_dir=repo_dir)
    root = scan or registries.root()
    index = DownIndex.scan(registries, root, records=records)
    try:
        graph = index.from_commit(commit, where=root.url)
    except NotFoundError:
        recorded = {c.removesuffix("-dirty") for c in index.commits.values()}
        earlier = next((c for c in (same_content(commit) if same_content else ()) if c in recorded), None)
        if earlier is None:
            raise
        graph = index.from_commit(earlier, where=root.url)
        graph.note = (
            f"{commit[:12]} changed nothing trainops tracks since {earlier[:12]}, whose content it is: "
            f"the walk starts there"
        )
    if manifest is not None:
        add_rollouts(graph, manifest)
    return graph
