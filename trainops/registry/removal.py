"""Removing a tag or a manifest from any backend: `registry rm` and checkpoint retention."""

from __future__ import annotations

from dataclasses import dataclass

from trainops.errors import InputError
from trainops.registry.context import Registries
from trainops.registry.protect import Override, check_remove
from trainops.registry.reference import Reference
from trainops.registry.store import resolve


@dataclass(frozen=True)
class RemoveResult:
    ref: Reference
    removed: str  # "tag" or "manifest"


def remove(registries: Registries, *, ref: Reference, override: Override | None = None) -> RemoveResult:
    """Remove a tag (REPO:TAG) or a manifest and its tags (REPO@DIGEST); a release only with
    an override (trainops.registry.protect)."""
    backend = registries.backend(ref)
    if not ref.digest and not ref.tag:
        raise InputError(f"{ref} names neither a tag nor a digest", hint="write REPO:TAG or REPO@sha256:…")
    found = resolve(registries, ref=ref)
    check_remove(str(ref), found.parsed, override=override)
    if ref.digest:
        backend.delete_manifest(ref.repository, ref.digest)
        return RemoveResult(ref, "manifest")
    assert ref.tag is not None
    backend.delete_tag(ref.repository, ref.tag)
    return RemoveResult(ref, "tag")
