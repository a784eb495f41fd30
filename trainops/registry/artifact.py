"""The trainops artifact format: files → layers, lineage → config blob and annotations.

A checkpoint, model or dataset is an OCI image manifest with one uncompressed layer per
file (ModelPack media types, the relative path in `org.cncf.model.filepath`). Lineage
travels inside the artifact: the config blob (application/vnd.trainops.config.v1+json)
for trainops kinds, and the `dev.trainops.lineage` annotation on every kind — models
keep a ModelPack config blob, which admits no extra fields. See registry/SPEC.md.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops import clock
from trainops.errors import InputError, IntegrityError
from trainops.registry import media
from trainops.registry.backends.base import Descriptor, ManifestData, sha256_digest
from trainops.registry.lineage_data import Lineage

if TYPE_CHECKING:
    from trainops.registry.models import ArtifactConfig as ArtifactConfig


def __getattr__(name: str) -> Any:
    """The pydantic ArtifactConfig loads on first use: nothing but its schema needs it."""
    if name == "ArtifactConfig":
        from trainops.registry import models  # lazy: loads pydantic

        return models.ArtifactConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ModelConfig:
    """ModelPack config fields of a model: `descriptor` (name, version, …) and `config`
    (format, paramSize, precision, architecture)."""

    descriptor: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FileEntry:
    """A file of an artifact: its path inside the artifact and where it is on disk."""

    relpath: str
    path: Path
    size: int
    mtime: float
    executable: bool


def scan_tree(source: Path) -> list[FileEntry]:
    """The regular files under source (or source itself), sorted by relative path.

    Symlinks to files are followed (a Hugging Face snapshot is all symlinks); symlinked
    directories are not entered, so a loop cannot trap the walk.
    """
    if not source.exists():
        raise InputError(f"{source} does not exist", hint="pass a file or a directory to push")
    if source.is_file():
        st = source.stat()
        return [FileEntry(source.name, source, st.st_size, st.st_mtime, bool(st.st_mode & 0o111))]
    entries: list[FileEntry] = []
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if not full.is_file():
                continue  # sockets, fifos, dangling links
            st = full.stat()
            rel = full.relative_to(source).as_posix()
            entries.append(FileEntry(rel, full, st.st_size, st.st_mtime, bool(st.st_mode & 0o111)))
    if not entries:
        raise InputError(f"{source} holds no files", hint="push a directory with at least one file")
    return sorted(entries, key=lambda e: e.relpath)


NAME_MAX = 255  # bytes in one path component on Linux filesystems (ext4, XFS, btrfs, overlayfs)


def safe_relpath(relpath: str, where: str) -> str:
    """Refuse a file path from an artifact that could escape the destination."""
    bad = (
        not relpath
        or "\x00" in relpath
        or "\\" in relpath
        or relpath.startswith("/")
        or (len(relpath) > 1 and relpath[1] == ":")
        or any(part in ("", ".", "..") for part in relpath.split("/"))
        or posixpath.normpath(relpath) != relpath
    )
    shown = repr(relpath) if len(relpath) <= 80 else f"{relpath[:60]!r}… ({len(relpath)} characters)"
    if bad:
        raise IntegrityError(
            f"{where}: file path {shown} would escape the destination",
            hint="the artifact is malformed or hostile; nothing was written",
        )
    try:
        longest = max(len(part.encode("utf-8")) for part in relpath.split("/"))
    except UnicodeEncodeError:
        raise IntegrityError(
            f"{where}: file path {shown} is not valid Unicode (a lone surrogate)",
            hint="the artifact is malformed or hostile; nothing was written",
        ) from None
    if longest > NAME_MAX:
        raise IntegrityError(
            f"{where}: file path {shown} has a name of {longest} bytes; no filesystem holds more than {NAME_MAX}",
            hint="the artifact is malformed or hostile; nothing was written",
        )
    return relpath


def created_time(files: list[FileEntry]) -> str:
    """SOURCE_DATE_EPOCH if set, else the newest file's mtime: same content, same digest."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    stamp = float(epoch) if epoch else max(f.mtime for f in files)
    return clock.stamp(stamp)


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def config_blob(
    kind: str,
    created: str,
    lineage: Lineage,
    layers: list[Descriptor],
    model: ModelConfig | None = None,
) -> tuple[bytes, str]:
    """The config blob bytes and media type for an artifact of kind (model: ModelPack's
    `descriptor` and `config` fields the caller knows, such as paramSize and precision).

    Built from plain data (no pydantic): the JSON is models.ArtifactConfig's dump, which
    tests/registry/test_lineage_data.py checks."""
    if kind == "model":
        found = (
            {"format": "safetensors"}
            if any(layer.annotations.get(media.A_FILEPATH, "").endswith(".safetensors") for layer in layers)
            else {}
        )
        extra = model or ModelConfig()
        body = {
            "descriptor": {
                "createdAt": created,
                **({"revision": lineage.git_commit} if lineage.git_commit else {}),
                **extra.descriptor,
            },
            "config": {**found, **extra.config},
            "modelfs": {"type": "layers", "diffIds": [layer.digest for layer in layers]},
        }
        return canonical_json(body), media.MODEL_CONFIG
    if kind not in media.KINDS:
        raise InputError(f"unknown artifact kind {kind!r}", hint=f"use one of {', '.join(media.KINDS)}")
    config = {"schemaVersion": 1, "kind": kind, "created": created, "lineage": lineage.as_json()}
    return canonical_json(config), media.CONFIG


def layer_descriptor(entry: FileEntry, digest: str, kind: str) -> Descriptor:
    annotations = {media.A_FILEPATH: entry.relpath, media.A_TITLE: entry.relpath}
    if entry.executable:
        annotations[media.A_FILE_MODE] = "0755"
    return Descriptor(media.layer_media_type(entry.relpath, kind), digest, entry.size, annotations)


def build_manifest(
    *,
    kind: str,
    config: Descriptor,
    layers: list[Descriptor],
    created: str,
    lineage: Lineage,
    annotations: dict[str, str],
    subject: Descriptor | None = None,
) -> ManifestData:
    notes = {
        media.A_CREATED: created,
        media.A_KIND: kind,
        media.A_LINEAGE: canonical_json(lineage.as_json()).decode(),
    }
    if lineage.git_commit:
        notes[media.A_REVISION] = lineage.git_commit
    notes.update(annotations)
    body: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "artifactType": media.ARTIFACT_TYPES.get(kind, media.ARTIFACT_TYPES["other"]),
        "config": config.as_oci(),
        "layers": [layer.as_oci() for layer in layers],
        "annotations": notes,
    }
    if subject is not None:
        body["subject"] = subject.as_oci()
    data = canonical_json(body)
    return ManifestData(data=data, media_type=media.OCI_MANIFEST, digest=sha256_digest(data))


@dataclass(frozen=True)
class ParsedManifest:
    """A manifest read back: what trainops needs of it, from any tool's artifact."""

    digest: str
    media_type: str
    size: int
    artifact_type: str | None
    config: Descriptor | None
    layers: list[Descriptor]
    annotations: dict[str, str]
    subject: Descriptor | None
    children: list[Descriptor]  # for an image index

    @property
    def kind(self) -> str:
        return media.kind_of(self.artifact_type or (self.config.media_type if self.config else None), self.annotations)

    @property
    def created(self) -> str | None:
        return self.annotations.get(media.A_CREATED)

    def lineage(self) -> Lineage:
        """The lineage annotation (the empty lineage when it is absent or refused)."""
        return Lineage.read(self.annotations.get(media.A_LINEAGE))

    def file_path(self, layer: Descriptor, index: int) -> str:
        """The path of a layer's file: ModelPack's filepath (either namespace), the OCI
        title, or a fallback."""
        return (
            layer.annotations.get(media.A_FILEPATH)
            or layer.annotations.get(media.A_FILEPATH_CNAI)
            or layer.annotations.get(media.A_TITLE)
            or f"layer-{index:04d}-{layer.digest[7:19]}"
        )


def parse_manifest(manifest: ManifestData) -> ParsedManifest:
    """A manifest or index as trainops reads it; IntegrityError names what is malformed."""
    try:
        body = json.loads(manifest.data)
        if not isinstance(body, dict):
            raise ValueError(f"it is a JSON {type(body).__name__}, not an object")
        config = Descriptor.from_oci(body["config"]) if body.get("config") else None
        layers = [Descriptor.from_oci(d) for d in _list(body, "layers")]
        children = [Descriptor.from_oci(d) for d in _list(body, "manifests")]
        subject = Descriptor.from_oci(body["subject"]) if body.get("subject") else None
        annotations = body.get("annotations") or {}
        if not isinstance(annotations, dict):
            raise ValueError("annotations is not an object")
        artifact_type = body.get("artifactType")
        if artifact_type is not None and not isinstance(artifact_type, str):
            raise ValueError("artifactType is not a string")
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise IntegrityError(f"manifest {manifest.digest} is not a valid OCI manifest: {err}") from None
    return ParsedManifest(
        digest=manifest.digest,
        media_type=manifest.media_type,
        size=len(manifest.data),
        artifact_type=artifact_type,
        config=config,
        layers=layers,
        annotations={str(k): str(v) for k, v in annotations.items()},
        subject=subject,
        children=children,
    )


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key) or []
    if not isinstance(value, list):
        raise ValueError(f"{key} is not a list")
    return value
