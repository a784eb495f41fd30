"""`trainops release ls` and `release show`: the releases of a repository, and one in full."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from trainops.checkpoint.catalog import tagged
from trainops.errors import InputError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.registry.store import resolve

MAX_CONFIG = 4 * 1024 * 1024


@dataclass(frozen=True)
class ReleaseInfo:
    ref: str  # repository:tag@sha256:…
    digest: str
    version: str | None
    checkpoint: str | None
    eval: str | None
    forced: bool
    reason: str | None
    by: str | None
    created: str | None
    size: int
    files: list[str] = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)  # ModelPack `config` (format, paramSize, …)
    signed_by: list[str] = field(default_factory=list)  # keys its model signatures name (show only; unverified)
    provenance: str | None = None  # its SLSA provenance record (show only)


def _info(ref: Reference, parsed: ParsedManifest, model: dict[str, Any] | None = None) -> ReleaseInfo:
    notes = parsed.annotations
    return ReleaseInfo(
        ref=str(ref.with_digest(parsed.digest)),
        digest=parsed.digest,
        version=notes.get(media.A_VERSION) or ref.tag,
        checkpoint=notes.get(media.A_RELEASE_CHECKPOINT),
        eval=notes.get(media.A_RELEASE_EVAL),
        forced=notes.get(media.A_RELEASE_FORCED) == "true",
        reason=notes.get(media.A_RELEASE_REASON),
        by=notes.get(media.A_RELEASE_BY),
        created=parsed.created,
        size=sum(layer.size for layer in parsed.layers),
        files=[parsed.file_path(layer, i) for i, layer in enumerate(parsed.layers)],
        model=model or {},
    )


def list_releases(registries: Registries, *, repository: Reference) -> list[ReleaseInfo]:
    """The model artifacts tagged in a repository, newest first."""
    if repository.tag or repository.digest:
        raise InputError(f"{repository} names a tag or digest", hint="pass the release repository itself")
    found = [
        _info(repository.with_tag(t.tag), t.parsed)
        for t in tagged(registries, repository=repository)
        if t.parsed.kind == "model"
    ]
    return sorted(found, key=lambda r: (r.created or "", r.version or ""), reverse=True)


def show_release(registries: Registries, *, ref: Reference) -> ReleaseInfo:
    """One release with its files and its ModelPack config."""
    found = resolve(registries, ref=ref)
    if found.parsed.kind != "model":
        raise InputError(f"{ref} is a {found.parsed.kind}, not a model release")
    config: dict[str, Any] = {}
    blob = found.parsed.config
    if blob is not None and blob.media_type == media.MODEL_CONFIG and blob.size <= MAX_CONFIG:
        with registries.backend(found.ref).open_blob(found.ref.repository, blob.digest) as fh:
            try:
                body = json.loads(fh.read(MAX_CONFIG + 1))
            except ValueError:
                body = {}
        config = body.get("config") or {} if isinstance(body, dict) else {}
    from trainops.signing.records import list_records

    records = list_records(registries, subject=found)
    keys = sorted({r.key or "unnamed key" for r in records if r.predicate_type == media.MODEL_SIGNING_PREDICATE})
    provenance = next((r.ref for r in reversed(records) if r.predicate_type == media.SLSA_PROVENANCE), None)
    return replace(_info(found.ref, found.parsed, config), signed_by=keys, provenance=provenance)
