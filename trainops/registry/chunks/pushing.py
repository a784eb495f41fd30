"""A push's chunked files: chunks cut, new ones packed and uploaded, an index per file.

Files are chunked one after another on the calling thread (the chunker hashes on its own
small pool), so packs come out the same whatever the timing: a push interrupted and run
again builds the very same packs, finds the ones already sent (one HEAD each) and sends
only the rest. A pack is sealed at PACK_SIZE bytes (16 MiB; the format allows 64), hashed and uploaded on
a background thread while chunking goes on; at most IN_FLIGHT + 1 sealed packs wait, so
memory stays flat whatever the size of the files (about (IN_FLIGHT + 3) × PACK_SIZE at worst).
"""

from __future__ import annotations

import hashlib
import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from trainops.registry import media
from trainops.registry.artifact import FileEntry
from trainops.registry.backends.base import Backend, BackgroundHash, BlobSource, Descriptor
from trainops.registry.chunks.chunker import CHUNKING, Chunker
from trainops.registry.chunks.index import ChunkIndex, ChunkRef, index_layer
from trainops.registry.chunks.known import KnownChunks, gather
from trainops.registry.context import ProgressSink
from trainops.registry.digestcache import DigestCache

# What this writer packs (the format allows up to 64 MiB, registry/SPEC.md): measured on a
# 256 MiB push, 64 MiB packs held 287 MB at peak
PACK_SIZE = 16 * 1024 * 1024
IN_FLIGHT = 2
CHUNKED_MIN = 1024 * 1024  # smaller files stay one plain layer each (file-level dedup)


class _Pack:
    """A pack being filled, then sealed: its bytes go to an upload thread."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.future: Future[tuple[str, int, bool]] | None = None

    @property
    def digest(self) -> str:
        assert self.future is not None, "a pack's digest is known once it is sealed"
        return self.future.result()[0]


@dataclass
class ChunkedResult:
    """What the chunked files of a push became."""

    indexes: list[tuple[FileEntry, Descriptor]] = field(default_factory=list)  # (file, index layer)
    digests: list[tuple[str, int]] = field(default_factory=list)  # (file digest, size), as indexes
    packs: list[Descriptor] = field(default_factory=list)  # every pack the indexes name
    bytes_sent: int = 0  # packs and indexes uploaded
    bytes_shared: int = 0  # file bytes found in the repository's packs
    packs_sent: int = 0
    packs_skipped: int = 0


class ChunkedPush:
    """Chunk files into packs of one repository; finish() uploads the indexes."""

    def __init__(self, backend: Backend, repo: str, known: KnownChunks, progress: ProgressSink) -> None:
        self.backend, self.repo, self.known, self.progress = backend, repo, known, progress
        self._new: dict[bytes, tuple[_Pack, int, int]] = {}
        self._pack = _Pack()
        self._sealed: list[_Pack] = []
        self._uploads = ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="pack-upload")
        self._slots = threading.Semaphore(IN_FLIGHT + 1)
        self._files: list[tuple[FileEntry, str, list[tuple[_Pack | str, int, int, bytes]]]] = []
        self.result = ChunkedResult()

    def add_file(self, entry: FileEntry, chunker: Chunker, cache: DigestCache) -> None:
        """Chunk one file into the push; a file the digest cache knows unchanged, whose
        index the repository already has (its packs present), is not read at all."""
        cached = cache.lookup(entry.path)
        same = self.known.whole_file(cached[0]) if cached is not None and cached[1] == entry.size else None
        if same is not None:
            cache.hits += 1
            self.result.bytes_shared += entry.size
            refs = [(same.packs[c.pack], c.offset, c.length, c.digest) for c in same.chunks]
            self._files.append((entry, same.digest, list(refs)))
            return
        refs_new: list[tuple[_Pack | str, int, int, bytes]] = []
        advance = self.progress.add(entry.relpath, entry.size)
        file_hash = BackgroundHash()
        before = entry.path.stat()
        with entry.path.open("rb") as fh:
            for chunk in chunker.chunks(fh, entry.path, entry.size):
                file_hash.update(chunk.data)
                refs_new.append(self._place(chunk.digest, chunk.data))
                advance(len(chunk.data))
        digest = "sha256:" + file_hash.hexdigest()
        cache.misses += 1
        cache.remember(entry.path, digest, before)
        self._files.append((entry, digest, refs_new))

    def _place(self, digest: bytes, data: memoryview) -> tuple[_Pack | str, int, int, bytes]:
        found = self.known.find(digest)
        if found is not None and found.length == len(data):
            self.result.bytes_shared += len(data)
            return found.pack, found.offset, found.length, digest
        mine = self._new.get(digest)
        if mine is not None:
            self.result.bytes_shared += len(data)
            return mine[0], mine[1], mine[2], digest
        if len(self._pack.buf) + len(data) > PACK_SIZE:
            self._seal()
        pack = self._pack
        offset = len(pack.buf)
        pack.buf += data
        self._new[digest] = (pack, offset, len(data))
        return pack, offset, len(data), digest

    def _seal(self) -> None:
        pack, self._pack = self._pack, _Pack()
        if not pack.buf:
            return
        data = bytes(pack.buf)
        pack.buf = bytearray()
        self._slots.acquire()  # at most IN_FLIGHT packs wait for their upload
        pack.future = self._uploads.submit(self._upload, data)
        self._sealed.append(pack)

    def _upload(self, data: bytes) -> tuple[str, int, bool]:
        try:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            if self.backend.blob_size(self.repo, digest) == len(data):
                return digest, len(data), False
            source = BlobSource(digest=digest, size=len(data), opener=partial(io.BytesIO, data))
            self.backend.upload_blob(self.repo, source)
            return digest, len(data), True
        finally:
            self._slots.release()

    def finish(self) -> ChunkedResult:
        """Seal the last pack, wait for every upload, then write each file's index."""
        self._seal()
        self._uploads.shutdown(wait=True)
        packs: dict[str, int] = {}
        used: set[str] = set()
        for pack in self._sealed:
            digest, size, sent = pack.future.result() if pack.future else ("", 0, False)
            packs[digest] = size
            self.result.bytes_sent += size if sent else 0
            self.result.packs_sent += int(sent)
            self.result.packs_skipped += int(not sent)
        for entry, digest, refs in self._files:
            index = _index(entry, digest, refs)
            data = index.encode()
            layer = index_layer(index, data, executable=entry.executable)
            if self.backend.blob_size(self.repo, layer.digest) != layer.size:
                source = BlobSource(digest=layer.digest, size=layer.size, opener=partial(io.BytesIO, data))
                self.backend.upload_blob(self.repo, source)
                self.result.bytes_sent += layer.size
            self.result.indexes.append((entry, layer))
            self.result.digests.append((digest, entry.size))
            used.update(index.packs)
            for name in index.packs:
                packs.setdefault(name, self.known.pack_sizes.get(name, 0))
        self.result.packs = [Descriptor(media.CHUNK_PACK, d, packs[d]) for d in sorted(used)]
        return self.result

    def close(self) -> None:
        self._uploads.shutdown(wait=True, cancel_futures=True)


def _index(entry: FileEntry, digest: str, refs: list[tuple[_Pack | str, int, int, bytes]]) -> ChunkIndex:
    order: dict[str, int] = {}
    chunks = []
    for ref, offset, length, chunk_digest in refs:
        name = ref if isinstance(ref, str) else ref.digest
        position = order.setdefault(name, len(order))
        chunks.append(ChunkRef(position, offset, length, chunk_digest))
    return ChunkIndex(entry.relpath, entry.size, digest, CHUNKING, tuple(order), tuple(chunks))


def push_files(
    backend: Backend,
    repo: str,
    files: list[FileEntry],
    *,
    parents: list[str],
    tag: str | None,
    progress: ProgressSink,
    cache: DigestCache,
) -> ChunkedResult:
    """Push files in the chunked form, deduplicated against what the repository holds
    (the parents' chunks, the tag's and the newest checkpoints'): packs and indexes are
    in the repository when this returns; the caller writes the manifest."""
    known = gather(backend, repo, parents=parents, tag=tag)
    job = ChunkedPush(backend, repo, known, progress)
    try:
        with Chunker() as chunker:
            for entry in files:
                job.add_file(entry, chunker, cache)
        return job.finish()
    finally:
        job.close()
