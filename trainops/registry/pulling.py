"""Pull: an artifact's files into a directory, every byte verified, staged, then placed.

Part of the Store API (store.py has push, resolve, tag, copy and remove); kept apart so
that neither file grows past what one reads in a sitting.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import ExistsError, InputError, IntegrityError
from trainops.interrupt import NOTHING_PULLED, parallel
from trainops.registry import media
from trainops.registry.artifact import safe_relpath
from trainops.registry.backends.base import Descriptor
from trainops.registry.chunks.index import files_of, is_chunked
from trainops.registry.context import NullProgress, ProgressSink, Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, default_jobs, resolve
from trainops.serialize import HIDDEN

if TYPE_CHECKING:
    from trainops.registry.chunks.rebuild import Recipe


@dataclass(frozen=True)
class PullResult:
    ref: Reference
    digest: str
    dest: Path
    files: list[str]
    bytes_total: int
    bytes_received: int
    seconds: float
    bytes_reused: int = 0  # taken from a local copy (reuse=) instead of downloaded
    digests: dict[str, str] = field(default_factory=dict, metadata=HIDDEN)  # relpath → digest of each plain file


def _check_no_symlink(dest: Path, target: Path, ref: Reference) -> None:
    """No directory between dest and target may be a symlink (it could point anywhere)."""
    current = dest
    for part in target.relative_to(dest).parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise IntegrityError(
                f"{ref}: {current} is a symlink; pulling through it could write outside {dest}",
                hint="remove the symlink or pull into an empty directory; nothing was written",
            )
    if target.is_symlink():
        raise IntegrityError(f"{ref}: {target} is a symlink; refusing to write through it")


def pull(
    registries: Registries,
    *,
    ref: Reference,
    dest: Path,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
    paths: Collection[str] | None = None,
    reuse: Sequence[Path] = (),
    cache: DigestCache | None = None,
) -> PullResult:
    """Pull an artifact's files (or those of them named in paths) into dest. Only verified
    files ever appear in dest.

    reuse: directories that may already hold some of the files at the same relative path
    (a node-local copy of the checkpoint): a file there whose digest is the artifact's is
    linked (or copied) instead of downloaded. Digests come from the digest cache (cache, else
    the user's), so a file this pull placed costs a stat the next time.

    Blobs are downloaded into a staging directory inside dest and verified; only when all
    are verified are they moved into place. A chunked file (trainops.registry.chunks) is
    rebuilt there from its packs, every chunk and then the file verified. An interrupted
    pull resumes: verified files already staged are not fetched again.
    """
    started = time.monotonic()
    found = resolve(registries, ref=ref)
    plan, recipes = _pull_plan(registries, found, str(ref), paths)
    dest = dest.absolute()
    if dest.exists() and not dest.is_dir():
        raise ExistsError(f"{dest} exists and is not a directory")
    for rel, _ in plan:
        _check_no_symlink(dest, dest / rel, found.ref)
    # Stage beside dest (same filesystem, so the final moves are renames): dest itself
    # gains nothing until every blob has verified.
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.trainops-pull-{found.manifest.digest[7:23]}"
    cache = cache or DigestCache()
    reused = _reuse(plan, staging, reuse, cache)
    received = _stage_blobs(
        registries, found, plan, staging, recipes, progress=progress or NullProgress(), jobs=jobs or default_jobs(ref)
    )
    _place(plan, _unpacked(plan, staging, str(found.ref)), staging, dest)
    digests = {rel: layer.digest for rel, layer in plan if media.packing(layer.media_type) is None}
    remember(dest, digests, cache)
    return PullResult(
        ref=found.ref,
        digest=found.manifest.digest,
        dest=dest,
        files=[rel for rel, _ in plan],
        bytes_total=sum(layer.size for _, layer in plan),
        bytes_received=received,
        seconds=time.monotonic() - started,
        bytes_reused=reused,
        digests=digests,
    )


def _reuse(plan: list[tuple[str, Descriptor]], staging: Path, directories: Sequence[Path], cache: DigestCache) -> int:
    """Stage, as verified blobs, the files of plan that one of directories holds with the
    same digest (hard-linked, or copied across filesystems); the bytes so reused."""
    if not directories:
        return 0
    staging.mkdir(parents=True, exist_ok=True)
    reused = 0
    for rel, layer in plan:
        final = staging / layer.digest[7:]
        if media.packing(layer.media_type) is not None or final.exists():
            continue  # a tar layer's digest is not its file's
        for directory in directories:
            candidate = directory / rel
            try:
                if candidate.is_symlink() or not candidate.is_file() or candidate.stat().st_size != layer.size:
                    continue
                if cache.digest(candidate)[0] != layer.digest:
                    continue
                try:
                    os.link(candidate, final)
                except OSError:
                    shutil.copyfile(candidate, final)
            except OSError:
                continue
            reused += layer.size
            break
    return reused


def remember(dest: Path, digests: dict[str, str], cache: DigestCache | None = None) -> None:
    """Record the digest of each verified file under dest (relpath → digest), so a later
    pull reusing it (or a push of it) costs a stat instead of a read."""
    cache = cache or DigestCache()
    for rel, digest in digests.items():
        target = dest / rel
        with contextlib.suppress(OSError):
            cache.remember(target, digest, target.stat())


def _pull_plan(
    registries: Registries, found: Resolved, shown: str, paths: Collection[str] | None
) -> tuple[list[tuple[str, Descriptor]], dict[str, Recipe]]:
    """(relative path, the file's descriptor) of every file of the artifact (or of those in
    paths), hostile paths refused; and how to rebuild each chunked file, by its digest, its
    index checked against the manifest before anything is fetched."""

    parsed = found.parsed
    if parsed.children:
        raise InputError(f"{shown} is an image index", hint="pull one of its manifests by digest")
    views = files_of(parsed, str(found.ref))
    if paths is not None:
        missing = sorted(set(paths) - {v.path for v in views})
        if missing:
            raise InputError(f"{found.ref} has no file {missing[0]!r}", hint="name files the artifact holds")
        views = [v for v in views if v.path in paths]
    plan: list[tuple[str, Descriptor]] = []
    seen: set[str] = set()
    for view in views:
        rel = safe_relpath(view.path, str(found.ref))
        if rel in seen:
            raise IntegrityError(f"{found.ref}: two layers claim the file {rel!r}")
        seen.add(rel)
        notes = {media.A_FILE_MODE: view.mode} if view.mode else {}
        plan.append((rel, Descriptor(view.media_type, view.digest, view.size, notes)))
    if not is_chunked(parsed):
        return plan, {}
    from trainops.registry.chunks.rebuild import recipes  # lazy: loads concurrent.futures

    backend = registries.backend(found.ref)
    return plan, recipes(backend, found.ref.repository, parsed, views, str(found.ref))


def _stage_blobs(
    registries: Registries,
    found: Resolved,
    plan: list[tuple[str, Descriptor]],
    staging: Path,
    recipes: dict[str, Recipe],
    *,
    progress: ProgressSink,
    jobs: int,
) -> int:
    """Download each distinct blob into staging, verified; the bytes received. Blobs a
    previous, interrupted pull verified are kept and not fetched again."""
    staging.mkdir(exist_ok=True)
    backend = registries.backend(found.ref)
    unique = {layer.digest: (rel, layer) for rel, layer in plan}
    reader = None
    if recipes:
        from trainops.registry.chunks.rebuild import PackReader, rebuild  # lazy: loads concurrent.futures

        reader = PackReader(backend, found.ref.repository, staging)

    def fetch(item: tuple[str, tuple[str, Descriptor]]) -> int:
        digest, (rel, layer) = item
        final = staging / digest[7:]
        if final.is_file() and final.stat().st_size == layer.size:
            return 0
        part = staging / f"{digest[7:]}.part"
        if reader is not None and digest in recipes:  # its messages name the file already
            rebuild(reader, recipes[digest], part, progress.add(rel, layer.size))
        else:
            try:
                backend.download_blob(found.ref.repository, digest, part, progress.add(rel, layer.size))
            except IntegrityError as err:  # name the file: a digest alone tells a user nothing
                raise IntegrityError(f"{found.ref}: file {rel}: {err.message}", hint=err.hint) from None
        if part.stat().st_size != layer.size:
            part.unlink(missing_ok=True)
            raise IntegrityError(f"{found.ref}: {rel} has the wrong size, expected {layer.size}")
        os.replace(part, final)
        return layer.size

    try:
        received = sum(parallel(fetch, unique.items(), jobs, on_interrupt=NOTHING_PULLED))
        shutil.rmtree(staging / "packs", ignore_errors=True)  # whole packs read without Range support
        return received
    except IntegrityError:
        shutil.rmtree(staging, ignore_errors=True)  # damaged content: nothing worth keeping
        raise
    except BaseException:
        # Interrupted or a service failed: keep verified blobs, and the start of blobs being
        # downloaded (a backend continues one, verified whole), so a retry resumes.
        rebuilt = [staging / f"{digest[7:]}.part" for digest in recipes]  # a rebuild starts over
        for leftover in [*staging.glob("packs/*.part"), *rebuilt]:
            leftover.unlink(missing_ok=True)
        if not any(staging.iterdir()):
            staging.rmdir()
        raise


def _unpacked(plan: list[tuple[str, Descriptor]], staging: Path, where: str) -> dict[str, Path]:
    """relpath → the staged, verified file to place there: its blob, or the file a ModelPack
    tar layer (modctl's) holds, taken out and checked here, before anything is placed."""
    from trainops.registry.modelpack import unpack  # lazy: loads tarfile

    sources: dict[str, Path] = {}
    for rel, layer in plan:
        blob = staging / layer.digest[7:]
        if media.packing(layer.media_type) is None:
            sources[rel] = blob
            continue
        file = staging / f"{layer.digest[7:]}.file"
        if not file.is_file():
            part = staging / f"{layer.digest[7:]}.file.part"
            try:
                unpack(blob, part, media_type=layer.media_type, relpath=rel, where=f"{where}: {rel}")
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)  # nothing of it is worth keeping
                raise
            os.replace(part, file)
        sources[rel] = file
    return sources


def _place(plan: list[tuple[str, Descriptor]], sources: dict[str, Path], staging: Path, dest: Path) -> None:
    """Move every verified file to its path in dest (a copy where several files share one)."""
    dest.mkdir(parents=True, exist_ok=True)
    users: dict[Path, int] = {}
    for rel, _ in plan:
        users[sources[rel]] = users.get(sources[rel], 0) + 1
    for rel, layer in plan:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = sources[rel]
        users[source] -= 1
        if users[source]:
            shutil.copyfile(source, target)
        else:
            os.replace(source, target)
        mode = 0o755 if layer.annotations.get(media.A_FILE_MODE) == "0755" else 0o644
        os.chmod(target, mode)
    shutil.rmtree(staging, ignore_errors=True)
