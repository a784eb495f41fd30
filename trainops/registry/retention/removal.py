"""Removing a tag or a manifest from any backend: `registry rm` and checkpoint retention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainops.errors import InputError, NotFoundError
from trainops.registry.context import Registries
from trainops.registry.lineage import forget_manifest
from trainops.registry.reference import Reference
from trainops.registry.retention.keep import Guard
from trainops.registry.store import resolve

if TYPE_CHECKING:
    from trainops.registry.backends.base import Backend


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
        backend.delete_manifest(ref.repository, ref.digest)  # asked for by name: gone already is an error
        forget_manifest(ref.digest)
        return RemoveResult(ref, "manifest")
    assert ref.tag is not None
    backend.delete_tag(ref.repository, ref.tag)
    return RemoveResult(ref, "tag")


def delete_manifest(backend: Backend, repo: str, digest: str) -> bool:
    """Delete a manifest a deleting path has decided may go (gc, retention); False when it
    was gone already. Retention and `registry rm` delete without gc's lock (a delete takes
    nothing a push relies on), so another path may remove the manifest between a caller's
    read and its delete: the state wanted is reached either way, so that is not an error."""
    try:
        backend.delete_manifest(repo, digest)
    except NotFoundError:
        forget_manifest(digest)
        return False
    forget_manifest(digest)  # not when the registry refused: the manifest is still there
    return True
