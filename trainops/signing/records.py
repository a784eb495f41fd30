"""Signatures and provenance as OCI referrers of the artifact they describe.

Each is an OCI image manifest laid out as cosign lays out its bundle referrers: artifactType
application/vnd.dev.sigstore.bundle.v0.3+json, the empty config, one layer holding the
bundle, the `subject` set to the artifact's manifest, and the annotations
`dev.sigstore.bundle.predicateType` (model signing's or SLSA's), `dev.sigstore.bundle.content`
(`dsse-envelope`), `dev.trainops.signing.key` (the signer's fingerprint) and the creation
time. Provenance made without a key is the same, its layer an unsigned in-toto statement
(application/vnd.in-toto+json). They live in the artifact's repository, found through the
referrers API, or the referrers tag schema where the registry lacks it (Distribution 2.8);
file:// and s3:// keep their own referrer index. gc keeps them with their subject.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops.registry import media
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import Descriptor, ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.records import record_file
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, bytes_source, leased, resolve, upload_if_missing

MAX_RECORD = 4 * 1024 * 1024
TITLES = {media.MODEL_SIGNING_PREDICATE: "model.sig", media.SLSA_PROVENANCE: "provenance.sigstore.json"}


@dataclass(frozen=True)
class Record:
    """A signature or provenance referrer, as found: where it is and what it holds."""

    ref: str  # repository@sha256:… of the referrer manifest
    predicate_type: str
    key: str | None  # the signer's fingerprint the record claims (None: unsigned)
    media_type: str  # of its layer: a Sigstore bundle, or an unsigned in-toto statement
    created: str | None
    content: bytes


def push_record(
    registries: Registries,
    *,
    subject: Resolved,
    content: bytes,
    predicate_type: str,
    key: str | None,
    created: str,
    layer_type: str = media.SIGSTORE_BUNDLE,
) -> Reference:
    """Attach content (a bundle, or an unsigned statement) to subject; the record's pinned ref."""
    repo = subject.ref.with_tag(None).with_digest(None)
    backend = registries.backend(repo)
    notes = {
        media.A_BUNDLE_PREDICATE: predicate_type,
        media.A_CREATED: created,
        media.A_KIND: "other",
    }
    if layer_type == media.SIGSTORE_BUNDLE:
        notes[media.A_BUNDLE_CONTENT] = "dsse-envelope"
    if key is not None:
        notes[media.A_SIGNING_KEY] = key
    blob, empty = bytes_source(content), bytes_source(b"{}")
    title = TITLES.get(predicate_type, "record.json") if layer_type == media.SIGSTORE_BUNDLE else "provenance.json"
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "artifactType": layer_type,
        "config": Descriptor(media.OCI_EMPTY, empty.digest, empty.size).as_oci(),
        "layers": [Descriptor(layer_type, blob.digest, blob.size, {media.A_TITLE: title}).as_oci()],
        "subject": Descriptor(
            subject.manifest.media_type, subject.manifest.digest, len(subject.manifest.data)
        ).as_oci(),
        "annotations": notes,
    }
    data = canonical_json(body)
    manifest = ManifestData(data=data, media_type=media.OCI_MANIFEST, digest=sha256_digest(data))
    with leased(backend, repo.repository):
        upload_if_missing(backend, repo.repository, empty, lambda _n: None)
        upload_if_missing(backend, repo.repository, blob, lambda _n: None)
        backend.put_manifest(repo.repository, manifest)
    return repo.with_digest(manifest.digest)


def list_records(registries: Registries, *, subject: Resolved) -> list[Record]:
    """The signature and provenance records of an artifact, oldest first."""
    return records_of(registries, repository=subject.ref, digest=subject.manifest.digest)


def records_of(registries: Registries, *, repository: Reference, digest: str) -> list[Record]:
    """The signature and provenance records of the manifest `digest` in repository, oldest first."""
    repo = repository.with_tag(None).with_digest(None)
    backend = registries.backend(repo)
    records = []
    for found in backend.referrers(repo.repository, digest):
        if found.artifact_type not in (media.SIGSTORE_BUNDLE, media.IN_TOTO):
            continue
        records.append(_read(registries, repo.with_digest(found.digest)))
    return sorted(records, key=lambda r: (r.created or "", r.ref))


def _read(registries: Registries, ref: Reference) -> Record:
    found = resolve(registries, ref=ref)
    content = record_file(registries, found=found, what="a signature record", limit=MAX_RECORD)
    notes = found.parsed.annotations
    return Record(
        ref=str(found.ref.with_tag(None)),
        predicate_type=notes.get(media.A_BUNDLE_PREDICATE, ""),
        key=notes.get(media.A_SIGNING_KEY),
        media_type=found.parsed.layers[0].media_type,
        created=notes.get(media.A_CREATED),
        content=content,
    )
