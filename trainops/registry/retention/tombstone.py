"""Pruned records: what stays of an artifact whose content was deleted.

Retention deletes old checkpoints, but the checkpoints it keeps still name them as parents:
without a record, a lineage walk would stop at the first pruned one. Before an artifact is
deleted, a record takes its place: a manifest with no layers, tagged
`pruned-sha256-<hex>` in the same repository, whose annotations hold the deleted
manifest's digest, kind, creation time and lineage. The lineage walk reads the record when
the digest is gone and goes on through the pruned artifact's own parents.

The record's own `dev.trainops.lineage` is empty, so it is never mistaken for the artifact:
the deleted lineage lives under `dev.trainops.pruned.lineage`.
"""

from __future__ import annotations

from dataclasses import replace

from trainops.errors import NotFoundError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, build_manifest, config_blob, parse_manifest
from trainops.registry.backends.base import Descriptor
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference
from trainops.registry.store import bytes_source, leased, upload_if_missing

TAG_PREFIX = media.PRUNED_TAG_PREFIX
A_DIGEST = "dev.trainops.pruned.digest"
A_KIND = "dev.trainops.pruned.kind"
A_LINEAGE = "dev.trainops.pruned.lineage"
A_CREATED = "dev.trainops.pruned.created"
A_NAME = "dev.trainops.pruned.name"
KEPT = (media.A_CKPT_NAME, media.A_CKPT_LAYOUT)  # annotations of the deleted artifact a record keeps


def tag_for(digest: str) -> str:
    """`pruned-sha256-<hex>`: a valid tag that names the deleted digest."""
    return TAG_PREFIX + digest.replace(":", "-")


def is_record_tag(tag: str) -> bool:
    return tag.startswith(TAG_PREFIX)


def write_record(registries: Registries, *, repository: Reference, parsed: ParsedManifest, shown: str) -> str:
    """Record parsed (about to be deleted from repository) under its pruned tag; the digest of the record."""
    backend = registries.backend(repository)
    created = parsed.created or "1970-01-01T00:00:00Z"
    data, media_type = config_blob("other", created, Lineage(), [])
    source = bytes_source(data)
    with leased(backend, repository.repository):  # gc keeps the config blob until the manifest names it
        upload_if_missing(backend, repository.repository, source, lambda _n: None)
        notes = {
            A_DIGEST: parsed.digest,
            A_KIND: parsed.kind,
            A_CREATED: created,
            A_NAME: shown,
            A_LINEAGE: parsed.annotations.get(media.A_LINEAGE, "{}"),
        }
        notes.update({key: parsed.annotations[key] for key in KEPT if key in parsed.annotations})
        manifest = build_manifest(
            kind="other",
            config=Descriptor(media_type, source.digest, source.size),
            layers=[],
            created=created,
            lineage=Lineage(),
            annotations=notes,
        )
        backend.put_manifest(repository.repository, manifest, tag=tag_for(parsed.digest))
    return manifest.digest


def as_pruned(record: ParsedManifest) -> ParsedManifest | None:
    """The deleted artifact as its record describes it (its digest, kind, lineage), or None
    if record is not a pruned record."""
    notes = record.annotations
    digest = notes.get(A_DIGEST)
    if not digest:
        return None
    annotations = {key: notes[key] for key in KEPT if key in notes}
    annotations[A_DIGEST] = digest  # marks it as known from a record
    annotations[media.A_KIND] = notes.get(A_KIND, "other")
    annotations[media.A_LINEAGE] = notes.get(A_LINEAGE, "{}")
    if A_CREATED in notes:
        annotations[media.A_CREATED] = notes[A_CREATED]
    return replace(record, digest=digest, artifact_type=None, layers=[], annotations=annotations)


def read_record(registries: Registries, *, repository: Reference, digest: str) -> ParsedManifest | None:
    """The pruned artifact digest of repository as its record describes it, or None."""
    try:
        manifest = registries.backend(repository).get_manifest(repository.repository, tag_for(digest))
    except NotFoundError:
        return None
    found = as_pruned(parse_manifest(manifest))
    return found if found is not None and found.digest == digest else None
