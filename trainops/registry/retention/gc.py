"""Garbage collection: remove what no kept artifact needs.

Kept: every tagged artifact (or, with keep_last, the newest N tagged artifacts of each
repository), what trainops.registry.retention.keep keeps whatever the rule (the releases the GitOps
repo serves, releases without an override), and — transitively — everything a kept
artifact needs: its blobs, the parents its lineage names (in any repository of the
registry), its subject, the manifests of an index, the eval report a release names, and
the records (eval reports, signatures, provenance) whose subject it is. What keep_last
alone would have removed is reported with the reason it stays (`kept_for`). Everything
else goes: tags first, then manifests, then blobs no remaining manifest references (on
backends that can list blobs; an OCI registry reclaims blobs with its own garbage
collector).

gc may run while pushes are in flight. A push's blobs are unreferenced until its manifest
is written, so gc takes the gc lock of each repository, then lists its leases (a push
holds one from before its first blob check until its manifest is written), then reads the
registry: a repository with a push in flight is left whole for this run (reported in
`skipped_repositories` and the notes); a push that starts while gc holds the lock waits
until gc is done. trainops/registry/retention/lease.py has the ordering argument. Leases of killed
pushes are removed once older than the grace period; so are their unfinished uploads.
On oci:// gc removes artifacts only; the registry's own garbage collector reclaims blobs
(and must itself run when no push is in flight, as Distribution's requires).

Retention and `registry rm` delete without the gc lock (a delete takes away nothing a push
relies on): a manifest one of them removed after gc's scan is gone when gc comes to it,
which is what gc wanted; gc goes on (trainops.registry.retention.removal.delete_manifest)
and does not count it as its own.

Not covered by the leases: lineage parents in other repositories (a push names its parent
by digest before its lease; gc may remove a parent that no kept artifact needs), and
blobs a copy mounts from another repository of the registry (gc may remove a source blob
no kept artifact needs: the copy then fails, it never publishes a broken artifact).
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from trainops.errors import NotFoundError
from trainops.registry.artifact import ParsedManifest
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend
from trainops.registry.context import Registries
from trainops.registry.lineage import scan_registry
from trainops.registry.reference import Reference, RegistryRoot
from trainops.registry.retention import removal
from trainops.registry.retention.keep import Graph, Guard, Kept, Node, guarded_roots, needed
from trainops.registry.retention.lease import GcLocks


@dataclass
class GcResult:
    dry_run: bool
    kept: int = 0
    kept_for: list[Kept] = field(default_factory=list)  # what the rule alone would have removed, and why it stays
    removed_tags: list[str] = field(default_factory=list)
    removed_manifests: list[str] = field(default_factory=list)
    removed_blobs: int = 0
    removed_uploads: int = 0  # unfinished uploads older than the grace period
    removed_leases: int = 0  # leases of pushes that died, older than the grace period
    skipped_repositories: list[str] = field(default_factory=list)  # a push in flight, or another gc
    bytes_freed: int = 0
    notes: list[str] = field(default_factory=list)


DEFAULT_GRACE = 3600.0


def collect(
    registries: Registries,
    *,
    root: RegistryRoot,
    keep_last: int | None = None,
    dry_run: bool = False,
    grace: float = DEFAULT_GRACE,
    guard: Guard | None = None,
) -> GcResult:
    """Remove what no kept artifact needs, and unfinished uploads and leases older than
    grace seconds (a push in flight keeps touching its own, so a generous grace never
    touches them). Repositories with a push in flight are left whole (skipped_repositories)."""
    result = GcResult(dry_run=dry_run)
    with GcLocks(
        lambda repo: registries.backend(Reference(root.scheme, root.location, repo)),
        _repositories(registries, root),
        grace=grace,
        dry_run=dry_run,
    ) as locks:
        for repo, why in sorted(locks.busy.items()):
            result.skipped_repositories.append(Reference(root.scheme, root.location, repo).repo_url)
            result.notes.append(f"{Reference(root.scheme, root.location, repo).repo_url}: left whole, {why}")
        scanned = scan_registry(registries, root)  # after the leases: every finished push is in it
        graph = Graph.of(scanned)
        tags = _tags_of(registries, scanned)
        repos = sorted({ref.repository for ref, _, _ in scanned})
        kept = set(needed(graph, dict.fromkeys(_roots(scanned, tags, repos, keep_last))))
        extra = needed(graph, guarded_roots(graph, guard or Guard()), already=kept)
        result.kept_for = sorted(
            (Kept(graph.name(node), why or "") for node, why in extra.items() if node in graph.nodes),
            key=lambda k: k.artifact,
        )
        kept.update(extra)
        result.kept = len(kept & graph.nodes.keys())
        for ref, parsed, _ in scanned:
            if (ref.repo_url, parsed.digest) in kept or ref.repository not in locks.usable:
                continue
            if not dry_run:
                locks.check()
                if not removal.delete_manifest(registries.backend(ref), ref.repository, parsed.digest):
                    continue  # retention or `registry rm` removed it since the scan: not this run's
            for name in sorted(tags.get((ref.repository, parsed.digest), [])):
                result.removed_tags.append(f"{ref.repo_url}:{name}")
            result.removed_manifests.append(f"{ref.repo_url}@{parsed.digest}")
        for repo in sorted(locks.usable):  # with those that hold no manifest (a first push, killed)
            ref = Reference(root.scheme, root.location, repo)
            _drop_stale_leases(registries.backend(ref), repo, locks.stale.get(repo, []), result)
            _sweep(registries, ref, scanned, kept, grace, result, locks)
    return result


def _repositories(registries: Registries, root: RegistryRoot) -> list[str]:
    lister = open_backend(root, insecure=registries.insecure, insecure_registries=registries.insecure_registries)
    try:
        return lister.list_repositories()
    finally:
        lister.close()


def _drop_stale_leases(backend: Backend, repo: str, names: list[str], result: GcResult) -> None:
    result.removed_leases += len(names)
    if not result.dry_run:
        for name in names:
            backend.drop_lease(repo, name)


_Scanned = list[tuple[Reference, ParsedManifest, Any]]


def _tags_of(registries: Registries, scanned: _Scanned) -> dict[tuple[str, str], list[str]]:
    """(repository, manifest digest) → the tags naming it. A tag removed meanwhile (by
    retention, `registry rm`) is left out: gc then keeps more, never less."""
    tags: dict[tuple[str, str], list[str]] = {}
    for ref in {ref.repository: ref for ref, _, _ in scanned}.values():
        backend = registries.backend(ref)
        try:
            targets = backend.tag_targets(ref.repository)
            names = backend.list_tags(ref.repository) if targets is None else []
        except NotFoundError:
            continue
        if targets is None:
            targets = {}
            for name in names:
                with suppress(NotFoundError):
                    targets[name] = backend.get_manifest(ref.repository, name).digest
        for name, digest in targets.items():
            tags.setdefault((ref.repository, digest), []).append(name)
    return tags


def _roots(
    scanned: _Scanned, tags: dict[tuple[str, str], list[str]], repos: list[str], keep_last: int | None
) -> set[Node]:
    """The tagged manifests kept: all, or the newest keep_last of each repository."""
    roots: set[Node] = set()
    for repo in repos:
        tagged = [
            (r, p, tags[(repo, p.digest)]) for r, p, _ in scanned if r.repository == repo and (repo, p.digest) in tags
        ]
        tagged.sort(key=lambda item: (item[1].created or "", max(item[2])), reverse=True)
        keep = tagged if keep_last is None else tagged[:keep_last]
        roots.update((r.repo_url, p.digest) for r, p, _ in keep)
    return roots


def _sweep(
    registries: Registries,
    ref: Reference,
    scanned: _Scanned,
    kept: set[Node],
    grace: float,
    result: GcResult,
    locks: GcLocks,
) -> None:
    """One repository: stale uploads, then the blobs no kept manifest of it names."""
    repo, dry_run = ref.repository, result.dry_run
    backend = registries.backend(ref)
    for upload in backend.stale_uploads(repo, started_before=time.time() - grace):
        result.removed_uploads += 1
        result.bytes_freed += upload.size
        if not dry_run:
            locks.check()
            backend.remove_stale_upload(repo, upload)
    blobs = backend.list_blobs(repo)
    if blobs is None:
        result.notes.append(f"{ref.repo_url}: blobs are reclaimed by the registry's own garbage collector")
        return
    needed: set[str] = set()
    for r, parsed, _ in scanned:
        if r.repository == repo and (r.repo_url, parsed.digest) in kept:
            needed.add(parsed.digest)
            needed.update(layer.digest for layer in parsed.layers)
            if parsed.config:
                needed.add(parsed.config.digest)
            needed.update(c.digest for c in parsed.children)
    for digest in blobs:
        if digest in needed:
            continue
        result.removed_blobs += 1
        result.bytes_freed += backend.blob_size(repo, digest) or 0
        if not dry_run:
            locks.check()
            backend.delete_blob(repo, digest)
