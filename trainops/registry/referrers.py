"""Referrers travel with their subject: what is attached to an artifact (OCI 1.1 `subject`:
its signatures and SLSA provenance, eval reports, incident and other records) is copied
with it by `registry copy` and by a tag into another repository, so a copied release still
verifies, and still shows its eval, where it lands.

Each referrer manifest is copied byte for byte (its digest, and the `subject` it names, are
unchanged), blobs first, after the subject itself; the destination backend records it as
it records any referrer (the referrers API, the `sha256-<hex>` tag schema, or its own
index). Referrers of referrers (a signature of an eval report) follow, to a bounded depth.
One the destination already lists is not copied again, so a repeated copy moves nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from trainops.errors import IntegrityError
from trainops.registry.backends.base import ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

MAX_DEPTH = 4  # subject ← referrer ← referrer of it …: deeper chains are not followed

# Copies one manifest and its blobs from src's repository to dst's: (blobs copied, skipped, bytes)
CopyManifest = Callable[[ManifestData], tuple[int, int, int]]


def copy_referrers(
    registries: Registries,
    *,
    src: Reference,
    dst: Reference,
    digest: str,
    copy_manifest: CopyManifest,
    depth: int = 0,
) -> tuple[list[str], int, int]:
    """Copy every referrer of digest from src's repository to dst's (the subject is there
    already) with copy_manifest (the Store's). Returns (digests of the referrer manifests
    copied, blobs copied, bytes)."""
    source, target = registries.backend(src), registries.backend(dst)
    present = {d.digest for d in target.referrers(dst.repository, digest)}
    carried: list[str] = []
    blobs = nbytes = 0
    for found in source.referrers(src.repository, digest):
        if found.digest not in present:
            manifest = source.get_manifest(src.repository, found.digest)
            if sha256_digest(manifest.data) != found.digest:
                raise IntegrityError(
                    f"{src.with_digest(found.digest)}: the referrer's manifest does not match its digest",
                    hint="the artifact was copied, its tag was not written; check the source registry",
                )
            b, _, n = copy_manifest(manifest)
            carried.append(found.digest)
            blobs, nbytes = blobs + b, nbytes + n
        if depth < MAX_DEPTH:
            more, b, n = copy_referrers(
                registries, src=src, dst=dst, digest=found.digest, copy_manifest=copy_manifest, depth=depth + 1
            )
            carried, blobs, nbytes = carried + more, blobs + b, nbytes + n
    return carried, blobs, nbytes
