"""Reading the manifests of many tags at once, at a cost linear in their number.

A checkpoint every 100 steps of a long run leaves thousands of tags in one repository:
listing them must read the tag index once (file://) and each manifest once, not the
index again for every tag; remote registries answer one request per manifest, several
in flight at a time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trainops.errors import NotFoundError
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends.base import Backend
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

REMOTE_JOBS = 8


@dataclass(frozen=True)
class Tagged:
    """A tag of a repository and the manifest it points at."""

    tag: str
    parsed: ParsedManifest


def _by_digest(backend: Backend, repo: str, digest: str) -> ParsedManifest | None:
    try:
        return parse_manifest(backend.get_manifest(repo, digest))
    except NotFoundError:  # removed while listing
        return None


def _by_tag(backend: Backend, repo: str, tag: str) -> Tagged | None:
    try:
        return Tagged(tag, parse_manifest(backend.get_manifest(repo, tag)))
    except NotFoundError:  # moved or removed while listing
        return None


def tagged_manifests(registries: Registries, *, repository: Reference, tags: list[str]) -> list[Tagged]:
    """The manifests the tags point at, in the order of tags; tags removed meanwhile are
    left out. Where the tag listing carries digests, each distinct manifest is read once by
    digest; elsewhere each tag costs one request, REMOTE_JOBS of them in flight."""
    backend = registries.backend(repository)
    repo = repository.repository
    targets = backend.tag_targets(repo) if len(tags) > 1 else None
    if targets is not None:
        wanted = {targets[t] for t in tags if t in targets}
        parsed = {d: p for d in sorted(wanted) if (p := _by_digest(backend, repo, d)) is not None}
        return [Tagged(t, parsed[targets[t]]) for t in tags if targets.get(t) in parsed]
    if repository.scheme == "file" or len(tags) < 2:
        found = [_by_tag(backend, repo, t) for t in tags]
    else:
        with ThreadPoolExecutor(max_workers=REMOTE_JOBS) as pool:
            found = list(pool.map(lambda t: _by_tag(backend, repo, t), tags))
    return [t for t in found if t is not None]
