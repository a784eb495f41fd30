"""Reading artifacts: show one (files, kind, annotations, lineage, referrers), diff two."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.registry.store import resolve


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


def show(registries: Registries, *, ref: Reference) -> ArtifactInfo:
    found = resolve(registries, ref=ref)
    parsed = found.parsed
    lineage = parsed.lineage()
    files = [
        FileInfo(parsed.file_path(layer, i), layer.size, layer.digest, layer.media_type)
        for i, layer in enumerate(parsed.layers)
    ]
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
        lineage=lineage.model_dump(by_alias=True, exclude_none=True, exclude={"parents"}),
        parents=[p.model_dump(by_alias=True) for p in lineage.parents],
        subject=parsed.subject.digest if parsed.subject else None,
        referrers=[
            Referrer(d.digest, media.kind_of(d.artifact_type, d.annotations), d.artifact_type) for d in referrers
        ],
    )


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
    bytes_shared: int = 0
    data_properties: ClassVar[tuple[str, ...]] = ("same",)

    @property
    def same(self) -> bool:
        return not (self.added or self.removed or self.modified)


def diff(registries: Registries, *, a: Reference, b: Reference) -> Diff:
    """Files added, removed and modified from a to b (by path; modified = other digest)."""
    left, right = show(registries, ref=a), show(registries, ref=b)
    return diff_files(a=left.ref, b=right.ref, old_files=left.files, new_files=right.files)


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
