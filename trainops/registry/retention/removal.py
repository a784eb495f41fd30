"""Removing a tag or a manifest from any backend: `registry rm` and checkpoint retention."""

from __future__ import annotations

from dataclasses import dataclass

from trainops.errors import InputError
from trainops.registry.context import Registries
from trainops.registry.lineage import forget_manifest
from trainops.registry.reference import Reference
from trainops.registry.retention.keep import Guard
from trainops.registry.store import resolve


@dataclass(frozen=True)
class RemoveResult:
    ref: Reference
    removed: str  # "tag" or "manifest"


def remove(registries: Registries, *, ref: Reference, guard: Guard | None = None) -> RemoveResult:
    """Remove a tag (REPO:TAG) or a manifest and its tags (REPO@DIGEST), unless the guard
    (trainops.registry.retention.keep) keeps it: a served release never, a release only with an override."""
    backend = registries.backend(ref)
    if not ref.digest and not ref.tag:
        raise InputError(f"{ref} names neither a tag nor a digest", hint="write REPO:TAG or REPO@sha256:…")
    found = resolve(registries, ref=ref)
    (guard or Guard()).check_remove(str(ref), ref.repo_url, found.parsed)
    if ref.digest:
        backend.delete_manifest(ref.repository, ref.digest)
        forget_manifest(ref.digest)
        return RemoveResult(ref, "manifest")
    assert ref.tag is not None
    backend.delete_tag(ref.repository, ref.tag)
    return RemoveResult(ref, "tag")
