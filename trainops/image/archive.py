"""A `docker save` stream (docker-archive) turned into an OCI image in any trainops backend.

The docker builder pushes to an oci:// registry through the engine; for file:// and s3://
registries, which no engine can push to, the built image is exported from the engine
and stored here: its config blob unchanged, each layer as the uncompressed tar the
engine exported (whose digest is its diff_id, checked against the config), and an OCI
manifest carrying trainops' annotations. The stream is read once, in order, and staged
on disk, so memory stays flat whatever the image's size.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import IntegrityError
from trainops.image.image import OCI_CONFIG, OCI_LAYER, OCI_LAYER_GZIP, oci_manifest
from trainops.registry.backends.base import Backend, BlobSource, Descriptor, ManifestData
from trainops.registry.store import bytes_source, upload_if_missing

CHUNK = 1024 * 1024


class _ChunkReader(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self.pending:
            try:
                self.pending = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def _clean(name: str) -> str:
    return name[2:] if name.startswith("./") else name


@dataclass(frozen=True)
class _Staged:
    path: Path
    digest: str
    size: int


def _stage(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> _Staged:
    src = tar.extractfile(member)
    assert src is not None
    digest = hashlib.sha256()
    size = 0
    with src, dest.open("wb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return _Staged(dest, "sha256:" + digest.hexdigest(), size)


def _gunzip_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def import_archive(
    chunks: Iterator[bytes],
    *,
    backend: Backend,
    repo: str,
    annotations: dict[str, str],
    staging: Path,
    progress: Callable[[str, int], Callable[[int], None]],
) -> tuple[ManifestData, bytes]:
    """Store the image of a docker-archive stream in repo; return its manifest and config."""
    staging.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=staging, prefix="archive-"))
    try:
        staged: dict[str, _Staged] = {}
        with tarfile.open(fileobj=io.BufferedReader(_ChunkReader(chunks), CHUNK), mode="r|") as tar:
            for i, member in enumerate(tar):
                if member.isfile():
                    staged[_clean(member.name)] = _stage(tar, member, work / f"{i:06d}")
        if "manifest.json" not in staged:
            raise IntegrityError("the engine's image export has no manifest.json (not a docker-archive)")
        entries = json.loads(staged["manifest.json"].path.read_bytes())
        if not isinstance(entries, list) or len(entries) != 1:
            raise IntegrityError("the engine's image export does not hold exactly one image")
        entry = entries[0]
        config_file = staged.get(_clean(str(entry["Config"])))
        if config_file is None:
            raise IntegrityError("the engine's image export lacks its config")
        config = config_file.path.read_bytes()
        diff_ids = list((json.loads(config).get("rootfs") or {}).get("diff_ids") or [])
        layer_names = [_clean(str(name)) for name in entry.get("Layers") or []]
        if len(diff_ids) != len(layer_names):
            raise IntegrityError("the engine's image export lists a different number of layers than its config")
        layers: list[tuple[Descriptor, _Staged]] = []
        for name, diff_id in zip(layer_names, diff_ids, strict=True):
            blob = staged.get(name)
            if blob is None:
                raise IntegrityError(f"the engine's image export lacks the layer {name}")
            media_type = OCI_LAYER
            if blob.digest != diff_id:
                with blob.path.open("rb") as fh:
                    gzipped = fh.read(2) == b"\x1f\x8b"
                if not gzipped or _gunzip_digest(blob.path) != diff_id:
                    raise IntegrityError(f"layer {name} of the engine's export does not match its diff_id {diff_id}")
                media_type = OCI_LAYER_GZIP
            layers.append((Descriptor(media_type, blob.digest, blob.size), blob))
        seen: set[str] = set()
        for descriptor, blob in layers:
            if descriptor.digest in seen:
                continue
            seen.add(descriptor.digest)
            upload_if_missing(
                backend,
                repo,
                BlobSource(descriptor.digest, descriptor.size, path=blob.path),
                progress(f"layer {descriptor.digest[7:19]}", descriptor.size),
            )
        config_source = bytes_source(config)
        upload_if_missing(backend, repo, config_source, progress("config", config_source.size))
        manifest = oci_manifest(
            Descriptor(OCI_CONFIG, config_source.digest, config_source.size),
            [d for d, _ in layers],
            annotations,
        )
        return manifest, config
    finally:
        shutil.rmtree(work, ignore_errors=True)
