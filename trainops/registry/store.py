"""The Store API: push, resolve, tag, copy and remove artifacts on any backend (pull: pulling.py).

Every function is keyword-only and returns a result object; none prints. Transfers run
in parallel threads, skip blobs the destination has, verify every byte against its digest,
and publish a manifest only after all of its blobs are in place.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import ExistsError, InputError, IntegrityError, NotFoundError
from trainops.interrupt import NOTHING_PUBLISHED, parallel
from trainops.registry import media
from trainops.registry.artifact import (
    FileEntry,
    ModelConfig,
    ParsedManifest,
    build_manifest,
    config_blob,
    created_time,
    layer_descriptor,
    parse_manifest,
    scan_tree,
)
from trainops.registry.backends.base import Backend, BlobSource, Descriptor, ManifestData, sha256_digest
from trainops.registry.context import NullProgress, ProgressSink, Registries
from trainops.registry.digestcache import DigestCache, cache_dir
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference
from trainops.registry.referrers import copy_referrers
from trainops.registry.retention.protect import Override, check_move

if TYPE_CHECKING:
    from trainops.registry.chunks.pushing import ChunkedResult


def default_jobs(ref: Reference) -> int:
    return 2 if ref.scheme == "file" else 8


@dataclass(frozen=True)
class Resolved:
    ref: Reference  # pinned: carries the digest
    manifest: ManifestData
    parsed: ParsedManifest


def resolve(registries: Registries, *, ref: Reference) -> Resolved:
    """The manifest a reference names (by digest if pinned, else by tag, else `latest`)."""
    target = ref.target or "latest"
    manifest = registries.backend(ref).get_manifest(ref.repository, target)
    if ref.digest and manifest.digest != ref.digest:
        raise IntegrityError(f"{ref}: registry returned manifest {manifest.digest}")
    tag = ref.tag or (None if ref.digest else "latest")
    return Resolved(ref.with_tag(tag).with_digest(manifest.digest), manifest, parse_manifest(manifest))


def tag_target(backend: Backend, repo: str, tag: str | None) -> str | None:
    """The digest tag points at now, or None (no tag given, or no such tag)."""
    if not tag:
        return None
    try:
        return backend.get_manifest(repo, tag).digest
    except NotFoundError:
        return None


def tag_move(
    backend: Backend,
    repo: str,
    tag: str | None,
    digest: str,
    *,
    move_tag: bool,
    where: str,
    current: str | None = None,
    override: Override | None = None,
) -> str | None:
    """Before pointing tag at digest: the digest it points at now when that differs (the tag
    moves), else None. With move_tag=False a move is refused (ExistsError, nothing written):
    the rule for tags that must never change, such as releases. The check precedes the
    write; a registry without conditional tag writes cannot make the pair atomic. `current`:
    the tag's target when the caller has just read it (tag_target), else it is read here."""
    current = tag_target(backend, repo, tag) if current is None else current
    if current is None or current == digest:
        return None
    if not move_tag:
        raise ExistsError(
            f"tag {tag} of {where} points at {current[:19]}; refusing to move it to {digest[:19]}",
            hint="tags pushed with --no-move never change: push under a new tag",
        )
    check_move(backend, repo, tag, current, digest, where=where, override=override)
    return current


# -- push --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    ref: Reference
    digest: str
    files: int
    bytes_total: int
    bytes_sent: int
    blobs_skipped: int
    cache_hits: int
    seconds: float
    moved_from: str | None = None  # the digest the tag pointed at before, when the push moved it
    bytes_shared: int = 0  # chunked files: bytes found in chunks the repository already held
    signature: str | None = None  # the tree's own model.sig, kept as a referrer (signing/imported.py)


def leased(backend: Backend, repo: str) -> AbstractContextManager[None]:
    """Around every span from a first blob check to the manifest that references the blobs:
    a lease on the repository, so `registry gc` deletes none of its blobs meanwhile
    (trainops.registry.retention.lease has the protocol)."""
    from trainops.registry.retention.lease import writing  # lazy: loads socket

    return writing(backend, repo)


def upload_if_missing(backend: Backend, repo: str, source: BlobSource, advance: Callable[[int], None]) -> bool:
    """Upload a blob unless the repository already has it whole. True if it was sent."""
    if backend.blob_size(repo, source.digest) == source.size:
        return False
    backend.upload_blob(repo, source, advance)
    return True


def bytes_source(data: bytes) -> BlobSource:
    """A BlobSource for bytes in memory (configs, manifests)."""
    return BlobSource(digest=sha256_digest(data), size=len(data), opener=lambda: io.BytesIO(data))


def _check_push(ref: Reference, kind: str, dedup: str) -> None:
    if ref.digest:
        raise InputError(f"cannot push to a digest ({ref})", hint="push to a tag; the digest is computed")
    if kind not in media.KINDS or kind == "image":
        raise InputError(f"unknown artifact kind {kind!r}", hint="use checkpoint, model, dataset, eval or other")
    if dedup not in DEDUP_MODES:
        raise InputError(f"unknown dedup mode {dedup!r}", hint=f"use one of {', '.join(DEDUP_MODES)}")


def _push_chunked(
    backend: Backend,
    ref: Reference,
    chunked: list[FileEntry],
    *,
    lineage: Lineage | None,
    progress: ProgressSink,
    cache: DigestCache,
    uploader: _Uploader,
) -> ChunkedResult:
    """The large files in the chunked form, deduplicated against the lineage parents (a
    file with nothing to dedup against goes as the uploader sends plain files)."""
    from trainops.registry.chunks.pushing import push_files  # lazy: loads concurrent.futures

    def whole(entry: FileEntry) -> tuple[str, int, bool]:
        outcome = uploader.transfer(entry)
        return outcome.digest, outcome.size, outcome.sent > 0

    parents = [p.digest for p in (lineage or Lineage()).parents]
    return push_files(
        backend, ref.repository, chunked, parents=parents, tag=ref.tag, progress=progress, cache=cache, whole=whole
    )


def push(
    registries: Registries,
    *,
    source: Path,
    ref: Reference,
    kind: str = "other",
    lineage: Lineage | None = None,
    annotations: dict[str, str] | None = None,
    subject: Descriptor | None = None,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
    cache: DigestCache | None = None,
    model: ModelConfig | None = None,
    move_tag: bool = True,
    override: Override | None = None,
    dedup: str = "off",
    skip: Collection[str] = (),  # relative paths of the tree's files left out
) -> PushResult:
    """Push a file or tree as one artifact, tagged if ref has a tag (model: ModelPack config).

    A tag naming other content moves (`moved_from` says from what); move_tag=False refuses
    before the manifest is written. dedup="chunks": files of CHUNKED_MIN bytes or more go in
    the chunked form, deduplicated against the parents and the repository's newest checkpoints."""
    started = time.monotonic()
    _check_push(ref, kind, dedup)
    progress = progress or NullProgress()
    cache = cache or DigestCache()
    files = [entry for entry in scan_tree(source) if entry.relpath not in skip]
    plain, chunked = _split(files, dedup)
    backend = registries.backend(ref)
    annotations = dict(annotations or {})
    with leased(backend, ref.repository):  # gc deletes no blob of the repository meanwhile
        uploader = _Uploader(backend, ref.repository, cache, progress)
        outcomes = parallel(uploader.transfer, plain, jobs or default_jobs(ref), on_interrupt=NOTHING_PUBLISHED)
        digests = [(o.digest, o.size) for o in outcomes]
        sent, skipped, shared = sum(o.sent for o in outcomes), sum(o.skipped for o in outcomes), 0
        layers = [
            layer_descriptor(_sized(entry, o.size), o.digest, kind) for entry, o in zip(plain, outcomes, strict=True)
        ]
        packs: list[Descriptor] = []
        if chunked:
            done = _push_chunked(
                backend, ref, chunked, lineage=lineage, progress=progress, cache=cache, uploader=uploader
            )
            layers += [layer for _, layer in done.indexes]
            digests += done.digests
            sent, skipped, shared = sent + done.bytes_sent, skipped + done.packs_skipped, done.bytes_shared
            packs = done.packs
            annotations[media.A_DEDUP] = "chunks"
        layers = sorted(layers, key=_layer_path) + packs
        files = plain + chunked
        published = _publish(
            backend,
            ref,
            kind=kind,
            created=created_time(files),
            lineage=lineage,
            layers=layers,
            annotations=annotations,
            subject=subject,
            model=model,
            move_tag=move_tag,
            override=override,
            progress=progress,
            before=lambda: _check_unchanged(files, digests),  # no manifest for a file that changed meanwhile
        )
    manifest, moved = published.manifest, published.moved_from
    sent, skipped = (sent + published.config_size, skipped) if published.config_sent else (sent, skipped + 1)
    return PushResult(
        ref=ref.with_digest(manifest.digest),
        digest=manifest.digest,
        files=len(files),
        bytes_total=sum(size for _, size in digests),
        bytes_sent=sent,
        blobs_skipped=skipped,
        cache_hits=cache.hits,
        seconds=time.monotonic() - started,
        moved_from=moved,
        bytes_shared=shared,
    )


DEDUP_MODES = ("off", "chunks")


def _split(files: list[FileEntry], dedup: str) -> tuple[list[FileEntry], list[FileEntry]]:
    """(files pushed one blob each, files pushed chunked)."""
    if dedup != "chunks":
        return files, []
    from trainops.registry.chunks.pushing import CHUNKED_MIN  # lazy: loads concurrent.futures

    return [f for f in files if f.size < CHUNKED_MIN], [f for f in files if f.size >= CHUNKED_MIN]


def _layer_path(layer: Descriptor) -> str:
    return layer.annotations.get(media.A_FILEPATH) or layer.annotations.get(media.A_CHUNKS_FILEPATH, "")


@dataclass(frozen=True)
class _FileOutcome:
    digest: str
    size: int
    sent: int
    skipped: bool


class _Uploader:
    """One file of a push, start to finish: its digest, then the blob unless the repository
    has it. Files run in parallel, so hashing one overlaps sending another. The digest comes
    from the cache; else, where the backend can, the file is stored while it is hashed (one
    read); else it is hashed, then sent if missing. A content two files share is sent once."""

    def __init__(self, backend: Backend, repo: str, cache: DigestCache, progress: ProgressSink) -> None:
        self.backend, self.repo, self.cache, self.progress = backend, repo, cache, progress
        self.claimed: set[str] = set()
        self.lock = threading.Lock()

    def _claim(self, digest: str) -> bool:
        with self.lock:
            first = digest not in self.claimed
            self.claimed.add(digest)
        return first

    def transfer(self, entry: FileEntry) -> _FileOutcome:
        cached = self.cache.lookup(entry.path)
        if cached is None:
            before = entry.path.stat()
            ingested = self.backend.ingest_file(self.repo, entry.path, self.progress.add(entry.relpath, before.st_size))
            if ingested is not None:
                self.cache.misses += 1
                self.cache.remember(entry.path, ingested[0], before)
                digest, size, new = ingested
                self._claim(digest)
                return _FileOutcome(digest, size, size if new else 0, not new)
            digest, size = self.cache.digest(entry.path)
        else:
            digest, size = cached
        if not self._claim(digest):  # another file of this push has the same content and sends it
            return _FileOutcome(digest, size, 0, False)
        if self.backend.blob_size(self.repo, digest) == size:
            return _FileOutcome(digest, size, 0, True)
        source = BlobSource(digest=digest, size=size, path=entry.path)
        self.backend.upload_blob(self.repo, source, self.progress.add(entry.relpath, size))
        return _FileOutcome(digest, size, size, False)


@dataclass(frozen=True)
class _Published:
    manifest: ManifestData
    config_sent: bool
    config_size: int
    moved_from: str | None


def _publish(
    backend: Backend,
    ref: Reference,
    *,
    kind: str,
    created: str,
    lineage: Lineage | None,
    layers: list[Descriptor],
    annotations: dict[str, str] | None,
    subject: Descriptor | None,
    model: ModelConfig | None,
    move_tag: bool,
    progress: ProgressSink,
    before: Callable[[], None] | None = None,
    override: Override | None = None,
) -> _Published:
    """The last step of a push or an assembly, once every layer is in the repository: the
    config blob, then the manifest (a reader never sees a manifest whose blobs are missing),
    tagged if ref has a tag (refused before anything is written when move_tag is False and
    the tag names other content). `before` runs just before the manifest is written."""
    lineage = Lineage() if lineage is None else lineage
    config_bytes, config_type = config_blob(kind, created, lineage, layers, model)
    config_src = bytes_source(config_bytes)
    manifest = build_manifest(
        kind=kind,
        config=Descriptor(config_type, config_src.digest, config_src.size),
        layers=layers,
        created=created,
        lineage=lineage,
        annotations=annotations or {},
        subject=subject,
    )
    sent = upload_if_missing(backend, ref.repository, config_src, progress.add("config", config_src.size))
    if before is not None:
        before()
    current = tag_target(backend, ref.repository, ref.tag)
    moved = tag_move(
        backend,
        ref.repository,
        ref.tag,
        manifest.digest,
        move_tag=move_tag,
        where=ref.repo_url,
        current=current,
        override=override,
    )
    if ref.tag is None or current != manifest.digest:
        # a tag that already names this very manifest has it, its blobs and its referrer
        # entry: writing it again would only rewrite the tag (on file://, index.json)
        backend.put_manifest(ref.repository, manifest, tag=ref.tag)
    return _Published(manifest, sent, config_src.size, moved)


def _sized(entry: FileEntry, size: int) -> FileEntry:
    return entry if entry.size == size else FileEntry(entry.relpath, entry.path, size, entry.mtime, entry.executable)


def _check_unchanged(files: list[FileEntry], digests: list[tuple[str, int]]) -> None:
    """A file that changed while it was pushed would make the manifest lie: refuse."""
    for entry, (_, size) in zip(files, digests, strict=True):
        st = entry.path.stat()
        if st.st_size != size or st.st_mtime != entry.mtime:
            raise InputError(
                f"{entry.path} changed while it was being pushed",
                hint="push a checkpoint only once it is complete; nothing was published",
            )


# -- tag, copy, remove ------------------------------------------------------------------


@dataclass(frozen=True)
class CopyResult:
    src: Reference
    dst: Reference
    digest: str
    blobs_copied: int
    blobs_skipped: int
    bytes_copied: int
    moved_from: str | None = None  # the digest dst's tag pointed at before, when it moved
    referrers: tuple[str, ...] = ()  # digests of the referrer manifests carried with it


def _blobs_of(parsed: ParsedManifest) -> list[Descriptor]:
    out = [parsed.config] if parsed.config else []
    unique = {d.digest: d for d in [*out, *parsed.layers]}
    return list(unique.values())


def copy_blobs(
    registries: Registries,
    *,
    src: Reference,
    dst: Reference,
    blobs: Iterable[Descriptor],
    progress: ProgressSink | None = None,
    jobs: int = 4,
) -> tuple[int, int, int]:
    """Make blobs of src's repository present in dst's: skip those it has, mount within one
    registry, else copy through a verified temporary file. Returns (copied, skipped, bytes)."""
    source, target = registries.backend(src), registries.backend(dst)
    same_root = src.root == dst.root
    sink = progress or NullProgress()

    def one(blob: Descriptor) -> tuple[int, int, int]:
        if target.blob_size(dst.repository, blob.digest) == blob.size:
            return 0, 1, 0
        if (
            same_root
            and src.repository != dst.repository
            and target.mount_blob(dst.repository, blob.digest, src.repository)
        ):
            return 1, 0, 0
        stage = cache_dir() / "copy"
        stage.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=stage, prefix=blob.digest[7:19])
        os.close(fd)
        tmp = Path(name)
        try:
            advance = sink.add(blob.digest[:19], blob.size * 2)
            source.download_blob(src.repository, blob.digest, tmp, advance)
            target.upload_blob(dst.repository, BlobSource(blob.digest, blob.size, path=tmp), advance)
        finally:
            tmp.unlink(missing_ok=True)
        return 1, 0, blob.size

    results = parallel(one, blobs, jobs, on_interrupt=NOTHING_PUBLISHED)
    return sum(r[0] for r in results), sum(r[1] for r in results), sum(r[2] for r in results)


def copy_manifest(
    registries: Registries,
    src: Reference,
    dst: Reference,
    manifest: ManifestData,
    progress: ProgressSink,
    jobs: int,
    tag: str | None,
) -> tuple[int, int, int]:
    """Copy manifest (an index: its manifests too) and its blobs from src's repository to
    dst's, blobs first; (blobs copied, skipped, bytes)."""
    parsed = parse_manifest(manifest)
    copied = skipped = nbytes = 0
    for child in parsed.children:  # an index: copy its manifests first, untagged
        child_manifest = registries.backend(src).get_manifest(src.repository, child.digest)
        c, s, n = copy_manifest(registries, src, dst, child_manifest, progress, jobs, None)
        copied, skipped, nbytes = copied + c, skipped + s, nbytes + n
    c, s, n = copy_blobs(registries, src=src, dst=dst, blobs=_blobs_of(parsed), progress=progress, jobs=jobs)
    copied, skipped, nbytes = copied + c, skipped + s, nbytes + n
    target = registries.backend(dst)
    target.put_manifest(dst.repository, manifest, tag=tag)
    return copied, skipped, nbytes


def copy(
    registries: Registries,
    *,
    src: Reference,
    dst: Reference,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
    move_tag: bool = True,
    override: Override | None = None,
) -> CopyResult:
    """Copy an artifact between any two backends, with its referrers (signatures, provenance,
    eval reports: referrers.py); its digest is unchanged. dst's tag moves
    if it named other content (refused with move_tag=False, or when it names a release and
    there is no override, before anything is copied)."""
    if dst.digest:
        raise InputError(f"cannot copy to a digest ({dst})", hint="name a repository and optionally a tag")
    found = resolve(registries, ref=src)
    tag = dst.tag or found.ref.tag
    digest = found.manifest.digest
    moved = tag_move(
        registries.backend(dst), dst.repository, tag, digest, move_tag=move_tag, where=dst.repo_url, override=override
    )
    sink, jobs = progress or NullProgress(), jobs or default_jobs(dst)
    carried: list[str] = []
    with leased(registries.backend(dst), dst.repository):
        if (src.root, found.ref.repository) == (dst.root, dst.repository):  # a new tag, nothing to carry
            copied, skipped, nbytes = copy_manifest(registries, found.ref, dst, found.manifest, sink, jobs, tag)
        else:  # the artifact, then its referrers; the tag last, so a failed copy moves no tag

            def one(manifest: ManifestData) -> tuple[int, int, int]:
                return copy_manifest(registries, found.ref, dst, manifest, sink, jobs, None)

            copied, skipped, nbytes = one(found.manifest)
            carried, more, more_bytes = copy_referrers(
                registries, src=found.ref, dst=dst, digest=digest, copy_manifest=one
            )
            copied, nbytes = copied + more, nbytes + more_bytes
            if tag:
                registries.backend(dst).put_manifest(dst.repository, found.manifest, tag=tag)
    pinned = dst.with_tag(tag).with_digest(digest)
    return CopyResult(found.ref, pinned, digest, copied, skipped, nbytes, moved, tuple(carried))


@dataclass(frozen=True)
class AssembleResult:
    ref: Reference  # pinned
    digest: str
    blobs_copied: int
    bytes_copied: int


def assemble(
    registries: Registries,
    *,
    src: Reference,
    files: list[tuple[str, Descriptor]],
    ref: Reference,
    kind: str,
    created: str,
    lineage: Lineage | None = None,
    annotations: dict[str, str] | None = None,
    model: ModelConfig | None = None,
    progress: ProgressSink | None = None,
    move_tag: bool = True,
) -> AssembleResult:
    """A new artifact of files that are already blobs of src's repository, (relpath, layer)
    pairs: the blobs are mounted or copied (verified) into ref's repository, never pulled
    to this machine; then the config and the manifest are written, tagged if ref has a tag."""
    if ref.digest:
        raise InputError(f"cannot write to a digest ({ref})", hint="name a tag; the digest is computed")
    layers = []
    for relpath, layer in files:
        notes = {media.A_FILEPATH: relpath, media.A_TITLE: relpath}
        if layer.annotations.get(media.A_FILE_MODE):
            notes[media.A_FILE_MODE] = layer.annotations[media.A_FILE_MODE]
        layers.append(Descriptor(media.layer_media_type(relpath, kind), layer.digest, layer.size, notes))
    with leased(registries.backend(ref), ref.repository):
        copied, _, nbytes = copy_blobs(registries, src=src, dst=ref, blobs=layers, progress=progress)
        published = _publish(
            registries.backend(ref),
            ref,
            kind=kind,
            created=created,
            lineage=lineage,
            layers=layers,
            annotations=annotations,
            subject=None,
            model=model,
            move_tag=move_tag,
            progress=progress or NullProgress(),
        )
    manifest = published.manifest
    return AssembleResult(ref.with_digest(manifest.digest), manifest.digest, copied, nbytes)


def tag(
    registries: Registries, *, src: Reference, dst: Reference, move_tag: bool = True, override: Override | None = None
) -> CopyResult:
    """Point dst's tag at src's manifest (copying it first if dst is another repository);
    with move_tag=False (or a release tag without override) a tag that names other content
    is left alone (ExistsError)."""
    if not dst.tag:
        raise InputError(f"{dst} names no tag", hint="write the destination as REPO:TAG")
    return copy(registries, src=src, dst=dst, move_tag=move_tag, override=override)
