"""What a release is made of: the checkpoint's files that release.include/exclude select.

Without release.export the checkpoint is not pulled: the selected files are already blobs
of the checkpoint's repository, so the release is assembled from them (mounted server-side
within one registry, copied through a verified temporary file across registries, by the
store), and the ModelPack config is read from the safetensors headers
alone — 8 bytes and the JSON header of each weight file, streamed from the registry — and
config.json. With release.export the checkpoint is pulled (verified), converted, and the
export's output is pushed.
"""

from __future__ import annotations

import os
import shutil
from fnmatch import fnmatch
from pathlib import Path
from typing import IO, Any

from trainops.errors import InputError, NotFoundError
from trainops.manifest import Manifest
from trainops.manifest.stages import ReleaseSpec
from trainops.modelfiles.safetensors import MAX_CONFIG, ModelInfo, SafetensorsHeader, read_header, summarize
from trainops.registry import media
from trainops.registry.artifact import safe_relpath, scan_tree
from trainops.registry.backends.base import Descriptor
from trainops.registry.chunks.index import files_of
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.pulling import pull
from trainops.registry.store import Resolved
from trainops.release.export import run_export


def selected(relpath: str, spec: ReleaseSpec) -> bool:
    """Whether release.include matches the file (its path or name) and release.exclude does not."""

    def matches(patterns: list[str]) -> bool:
        name = relpath.rsplit("/", 1)[-1]
        return any(fnmatch(relpath, p) or fnmatch(name, p) for p in patterns)

    return matches(spec.include) and not matches(spec.exclude)


def _none_selected(found: Resolved, spec: ReleaseSpec) -> NotFoundError:
    return NotFoundError(
        f"no file of {found.ref} matches release.include {spec.include} (less exclude {spec.exclude})",
        hint="fix release.include / release.exclude",
    )


def select_files(found: Resolved, spec: ReleaseSpec) -> list[tuple[str, Descriptor]]:
    """(relpath, layer) of the checkpoint's files the release takes, sorted by path; for a
    chunked file, a descriptor of the whole file (its digest and size: no such blob yet)."""

    files = []
    for view in files_of(found.parsed, str(found.ref)):
        relpath = safe_relpath(view.path, str(found.ref))
        if selected(relpath, spec):
            notes = {media.A_FILE_MODE: view.mode} if view.mode else {}
            files.append(
                (
                    relpath,
                    view.layer if not view.chunked else Descriptor(view.media_type, view.digest, view.size, notes),
                )
            )
    if not files:
        raise _none_selected(found, spec)
    return sorted(files, key=lambda item: item[0])


def _blob_header(registries: Registries, found: Resolved, relpath: str, layer: Descriptor) -> SafetensorsHeader:
    """The header of a safetensors blob, streamed: read_header reads 8 bytes, then the header."""
    backend = registries.backend(found.ref)
    with backend.open_blob(found.ref.repository, layer.digest) as fh:
        position = 0

        def read_at(offset: int, length: int) -> bytes:
            nonlocal position
            if offset != position:  # read_header reads forward only; a stream serves that
                raise InputError(f"{relpath}: out-of-order read at {offset}")
            data = fh.read(length)
            position += len(data)
            return data

        return read_header(read_at, size=layer.size, name=f"{found.ref.repo_url}:{relpath}")


def remote_info(registries: Registries, found: Resolved, files: list[tuple[str, Descriptor]]) -> ModelInfo:
    """ModelInfo of the selected files, from their headers and config.json in the registry."""
    headers = [_blob_header(registries, found, rel, layer) for rel, layer in files if rel.endswith(".safetensors")]
    config = None
    for rel, layer in files:
        if rel == "config.json" and layer.size <= MAX_CONFIG:
            with registries.backend(found.ref).open_blob(found.ref.repository, layer.digest) as fh:
                config = fh.read(MAX_CONFIG + 1)
    return summarize([rel for rel, _ in files], headers, config)


def exported_files(
    manifest: Manifest,
    spec: ReleaseSpec,
    registries: Registries,
    found: Resolved,
    scratch: Path,
    progress: ProgressSink | None,
    stdout: int | IO[Any] | None,
) -> Path:
    """The checkpoint pulled (verified), converted by release.export, filtered: a directory."""

    assert spec.export is not None
    pulled = scratch / "checkpoint"
    pull(registries, ref=found.ref, dest=pulled, progress=progress)
    source = run_export(spec.export, manifest=manifest, checkpoint=found, source=pulled, scratch=scratch, stdout=stdout)
    out = scratch / "model"
    chosen = [e for e in scan_tree(source) if selected(e.relpath, spec)]
    if not chosen:
        raise _none_selected(found, spec)
    for entry in chosen:
        target = out / entry.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(entry.path, target)
        except OSError:
            shutil.copy2(entry.path, target)
    return out


def rebuilt_files(
    registries: Registries,
    found: Resolved,
    files: list[tuple[str, Descriptor]],
    scratch: Path,
    progress: ProgressSink | None,
) -> Path:
    """The selected files of a chunked checkpoint, pulled (rebuilt from its packs, verified)
    into a directory, to be pushed as one blob per file: releases are plain ModelPack models."""
    out = scratch / "model"
    pull(registries, ref=found.ref, dest=out, progress=progress, paths=[rel for rel, _ in files])
    return out
