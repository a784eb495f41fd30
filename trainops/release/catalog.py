"""`trainops release ls` and `release show`: the releases of a repository, and one in full."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from trainops.checkpoint.catalog import tagged
from trainops.errors import InputError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest
from trainops.registry.context import Opened, Registries
from trainops.registry.reference import TAG_RE, Reference
from trainops.registry.store import resolve
from trainops.signing.records import records_of

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
    signed_by: list[str] = field(default_factory=list)  # keys its model signatures name (unverified)
    provenance: str | None = None  # its SLSA provenance record


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
    """The model artifacts tagged in a repository, newest first, each as `show_release`
    reports it (one answer: its model config, signers and provenance too)."""
    if repository.tag or repository.digest:
        raise InputError(f"{repository} names a tag or digest", hint="pass the release repository itself")
    found = [
        _details(registries, repository.with_tag(t.tag).with_digest(t.parsed.digest), t.parsed)
        for t in tagged(registries, repository=repository)
        if t.parsed.kind == "model"
    ]
    return sorted(found, key=lambda r: (r.created or "", r.version or ""), reverse=True)


def show_named_release(ctx: Opened, text: str) -> ReleaseInfo:
    """The release `text` names: a reference, or a version as `release ls` prints it
    (`step-30`), a tag of the manifest's release repository when there is a manifest."""
    if ctx.manifest is not None and TAG_RE.match(text) and not any(c in text for c in ":/@"):
        from trainops.release.create import release_repository  # lazy: loads pydantic

        return show_release(ctx.registries, ref=release_repository(ctx.manifest, ctx.registries).with_tag(text))
    return show_release(ctx.registries, ref=ctx.registries.ref(text))


def show_release(registries: Registries, *, ref: Reference) -> ReleaseInfo:
    """One release with its files and its ModelPack config."""
    found = resolve(registries, ref=ref)
    if found.parsed.kind != "model":
        raise InputError(f"{ref} is a {found.parsed.kind}, not a model release")
    return _details(registries, found.ref, found.parsed)


def _details(registries: Registries, ref: Reference, parsed: ParsedManifest) -> ReleaseInfo:
    """A release's info with its ModelPack config, the keys that signed it and its provenance."""

    config: dict[str, Any] = {}
    blob = parsed.config
    if blob is not None and blob.media_type == media.MODEL_CONFIG and blob.size <= MAX_CONFIG:
        with registries.backend(ref).open_blob(ref.repository, blob.digest) as fh:
            try:
                body = json.loads(fh.read(MAX_CONFIG + 1))
            except ValueError:
                body = {}
        config = body.get("config") or {} if isinstance(body, dict) else {}
    records = records_of(registries, repository=ref, digest=parsed.digest)
    keys = sorted({r.key or "unnamed key" for r in records if r.predicate_type == media.MODEL_SIGNING_PREDICATE})
    provenance = next((r.ref for r in reversed(records) if r.predicate_type == media.SLSA_PROVENANCE), None)
    return replace(_info(ref, parsed, config), signed_by=keys, provenance=provenance)
