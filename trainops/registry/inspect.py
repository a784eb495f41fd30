"""Reading artifacts: show one (files, kind, annotations, lineage, referrers), diff two."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainops.errors import NotFoundError
from trainops.registry import media
from trainops.registry.artifact import parse_manifest
from trainops.registry.chunks.index import files_of, is_chunked, packs_of
from trainops.registry.chunks.sharing import shared_bytes
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, resolve


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    digest: str
    media_type: str


@dataclass(frozen=True)
class Referrer:
    """A record (eval report, attestation) whose subject is the artifact."""

    digest: str
    kind: str
    artifact_type: str | None
    record: str | None = None  # what a record is: signature, provenance (its predicate type says)


@dataclass(frozen=True)
class ChunkedInfo:
    """A chunked artifact's storage: its packs, and the bytes its files share with its
    first lineage parent (chunk by chunk) when that parent is in the same repository."""

    packs: int
    pack_bytes: int
    parent: str | None
    bytes_shared_with_parent: int | None


@dataclass
class ArtifactInfo:
    ref: str
    digest: str
    kind: str
    artifact_type: str | None
    media_type: str
    created: str | None
    size: int
    files: list[FileInfo]
    annotations: dict[str, str]
    lineage: dict[str, Any]
    parents: list[dict[str, str]]
    subject: str | None
    referrers: list[Referrer] = field(default_factory=list)
    chunked: ChunkedInfo | None = None  # the chunked form's packs, and what the first parent shares


def show(registries: Registries, *, ref: Reference) -> ArtifactInfo:
    found = resolve(registries, ref=ref)
    parsed = found.parsed
    lineage = parsed.lineage()
    files = [FileInfo(v.path, v.size, v.digest, v.media_type) for v in files_of(parsed, str(found.ref))]
    referrers = registries.backend(found.ref).referrers(found.ref.repository, found.manifest.digest)
    hidden = {media.A_LINEAGE}
    return ArtifactInfo(
        ref=str(found.ref),
        digest=found.manifest.digest,
        kind=parsed.kind,
        artifact_type=parsed.artifact_type,
        media_type=parsed.media_type,
        created=parsed.created,
        size=sum(f.size for f in files),
        files=files,
        annotations={k: v for k, v in sorted(parsed.annotations.items()) if k not in hidden},
        lineage={k: v for k, v in lineage.as_json().items() if k != "parents"},
        parents=[p.as_json() for p in lineage.parents],
        subject=parsed.subject.digest if parsed.subject else None,
        referrers=[
            Referrer(
                d.digest,
                media.kind_of(d.artifact_type, d.annotations),
                d.artifact_type,
                media.RECORDS.get((d.annotations or {}).get(media.A_BUNDLE_PREDICATE, "")),
            )
            for d in referrers
        ],
        chunked=_chunked_info(registries, found, lineage.parents[0].digest if lineage.parents else None)
        if is_chunked(parsed)
        else None,
    )


def _chunked_info(registries: Registries, found: Resolved, parent: str | None) -> ChunkedInfo:
    packs = packs_of(found.parsed)
    backend, repo = registries.backend(found.ref), found.ref.repository
    shared = None
    if parent is not None:
        try:
            old = parse_manifest(backend.get_manifest(repo, parent))
        except NotFoundError:  # pruned, or in another repository
            parent = None
        else:
            shared = shared_bytes(backend, repo, old=old, new=found.parsed)
    return ChunkedInfo(len(packs), sum(p.size for p in packs.values()), parent, shared)


@dataclass
class FileChange:
    path: str
    old: FileInfo | None
    new: FileInfo | None


@dataclass
class Diff:
    a: str
    b: str
    added: list[FileChange] = field(default_factory=list)
    removed: list[FileChange] = field(default_factory=list)
    modified: list[FileChange] = field(default_factory=list)
    unchanged: int = 0
    bytes_shared: int = 0  # of b's files unchanged from a
    chunk_bytes_shared: int = 0  # of b's bytes found in a: unchanged files, and chunks of chunked files
    data_properties: ClassVar[tuple[str, ...]] = ("same",)

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.modified)


def diff(registries: Registries, *, a: Reference, b: Reference) -> Diff:
    """Files added, removed and modified from a to b (by path; modified = other digest)."""

    left, right = resolve(registries, ref=a), resolve(registries, ref=b)
    old_files, new_files = show(registries, ref=left.ref).files, show(registries, ref=right.ref).files
    result = diff_files(a=str(left.ref), b=str(right.ref), old_files=old_files, new_files=new_files)
    backend = registries.backend(right.ref)
    if registries.backend(left.ref) is backend:  # chunk indexes are read from one registry
        result.chunk_bytes_shared = shared_bytes(
            backend, right.ref.repository, old=left.parsed, new=right.parsed, old_repo=left.ref.repository
        )
    else:
        result.chunk_bytes_shared = result.bytes_shared
    return result


def diff_files(*, a: str, b: str, old_files: list[FileInfo], new_files: list[FileInfo]) -> Diff:
    """The diff of two file lists (what diff compares, for callers that have the files)."""
    old = {f.path: f for f in old_files}
    new = {f.path: f for f in new_files}
    result = Diff(a=a, b=b)
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before is None:
            result.added.append(FileChange(path, None, after))
        elif after is None:
            result.removed.append(FileChange(path, before, None))
        elif before.digest != after.digest:
            result.modified.append(FileChange(path, before, after))
        else:
            result.unchanged += 1
            result.bytes_shared += after.size
    return result
