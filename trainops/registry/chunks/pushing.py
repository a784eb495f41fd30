"""A push's chunked files: chunks cut, new ones packed and uploaded, an index per file.

A file pushed while nothing is known to dedup against (a repository's first checkpoint,
new data) is sent whole, as a plain push sends it, and is its own pack: its chunks are cut
on another thread meanwhile, so later pushes dedup against them. Other files are chunked
one after another on the calling thread (the chunker hashes on its own small pool), so
packs come out the same whatever the timing: a push interrupted and run again builds the
very same packs, finds the ones already sent (one HEAD each) and sends only the rest. The
chunk lists are flat arrays (table.py), not an object per chunk. A pack is sealed at
PACK_SIZE bytes (16 MiB; the format allows 64), hashed and uploaded on a background
thread while chunking goes on; at most IN_FLIGHT + 1 sealed packs wait, so
memory stays flat whatever the size of the files (about (IN_FLIGHT + 3) × PACK_SIZE at worst).
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from trainops.registry import media
from trainops.registry.artifact import FileEntry
from trainops.registry.backends.base import Backend, BackgroundHash, BlobSource, Descriptor
from trainops.registry.chunks.chunker import CHUNKING, Chunker
from trainops.registry.chunks.index import ChunkIndex, index_layer
from trainops.registry.chunks.known import KnownChunks, gather
from trainops.registry.chunks.table import ChunkTable, DigestTable
from trainops.registry.context import ProgressSink
from trainops.registry.digestcache import DigestCache

# What this writer packs (the format allows up to 64 MiB, registry/SPEC.md): measured on a
# 256 MiB push, 64 MiB packs held 287 MB at peak
PACK_SIZE = 16 * 1024 * 1024
IN_FLIGHT = 2
CHUNKED_MIN = 1024 * 1024  # smaller files stay one plain layer each (file-level dedup)


class _Pack:
    """A pack being filled, then sealed: its bytes go to an upload thread."""

    def __init__(self, number: int) -> None:
        self.number = number  # in the push's pack list
        self.buf = bytearray()
        self.future: Future[tuple[str, int, bool]] | None = None


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


WholeUpload = Callable[[FileEntry], tuple[str, int, bool]]  # a file as one blob: (digest, size, sent)


class ChunkedPush:
    """Chunk files into packs of one repository; finish() uploads the indexes.

    Packs are numbered push-wide (`_packs`: a pack of this push being built, or the digest
    of a blob already in the repository); each file's ChunkTable names packs by that number
    until finish() writes its index."""

    def __init__(
        self, backend: Backend, repo: str, known: KnownChunks, progress: ProgressSink, whole: WholeUpload
    ) -> None:
        self.backend, self.repo, self.known, self.progress, self.whole = backend, repo, known, progress, whole
        self._new = DigestTable()  # chunks this push placed, rows naming push-wide pack numbers
        self._packs: list[_Pack | str] = []
        self._numbers: dict[str, int] = {}
        self._sizes: dict[str, int] = {}  # of the packs named by digest
        self._pack = self._open_pack()
        self._uploads = ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="pack-upload")
        self._slots = threading.Semaphore(IN_FLIGHT + 1)
        self._files: list[tuple[FileEntry, str, ChunkTable]] = []
        self.result = ChunkedResult()

    def _open_pack(self) -> _Pack:
        pack = _Pack(len(self._packs))
        self._packs.append(pack)
        return pack

    def _named(self, digest: str, size: int) -> int:
        number = self._numbers.get(digest)
        if number is None:
            number = self._numbers[digest] = len(self._packs)
            self._packs.append(digest)
            self._sizes[digest] = size
        return number

    def add_file(self, entry: FileEntry, chunker: Chunker, cache: DigestCache, cached: tuple[str, int] | None) -> None:
        """Chunk one file into the push; a file the digest cache knows unchanged (cached:
        its lookup), whose index the repository already has (its packs present), is not
        read at all. With nothing to dedup against yet, the file goes whole (add_whole)."""
        same = self.known.whole_file(cached[0]) if cached is not None and cached[1] == entry.size else None
        if same is not None:
            cache.hits += 1
            self.result.bytes_shared += entry.size
            numbers = [self._named(name, self.known.pack_sizes[name]) for name in same.packs]
            table = ChunkTable()
            for ref in same.chunks:
                table.append(numbers[ref.pack], ref.offset, ref.length, ref.digest)
            self._files.append((entry, same.digest, table))
            return
        if not len(self.known.chunks) and not len(self._new):
            self.add_whole(entry, chunker)
            return
        table = ChunkTable()
        advance = self.progress.add(entry.relpath, entry.size)
        file_hash = BackgroundHash()
        before = entry.path.stat()
        with entry.path.open("rb") as fh:
            for chunk in chunker.chunks(fh, entry.path, entry.size):
                file_hash.update(chunk.data)
                self._place(chunk.digest, chunk.data, table)
                advance(len(chunk.data))
        digest = "sha256:" + file_hash.hexdigest()
        cache.misses += 1
        cache.remember(entry.path, digest, before)
        self._files.append((entry, digest, table))

    def add_whole(self, entry: FileEntry, chunker: Chunker) -> None:
        """The file as one blob (sent as a plain push sends it: hashed while it is sent,
        no copy) that is its own pack, its chunks cut meanwhile on another thread: new
        data costs about what a plain push costs, and later pushes dedup against it."""
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-cut") as cutter:
            cut = cutter.submit(chunker.table, entry.path, entry.size, stop)
            try:
                digest, size, sent = self.whole(entry)
            except BaseException:
                stop.set()
                raise
            table = cut.result()
        number = self._named(digest, size)
        for row in range(len(table)):
            table.packs[row] = number
            self._new.add(table.digest(row), number, table.offsets[row], table.lengths[row])
        self.result.bytes_sent += size if sent else 0
        self.result.packs_sent += int(sent)
        self.result.packs_skipped += int(not sent)
        self._files.append((entry, digest, table))

    def _place(self, digest: bytes, data: memoryview, table: ChunkTable) -> None:
        found = self.known.find(digest)
        if found is not None and found.length == len(data):
            self.result.bytes_shared += len(data)
            table.append(self._named(found.pack, self.known.pack_sizes[found.pack]), found.offset, found.length, digest)
            return
        mine = self._new.get(digest)
        if mine is not None and mine.length == len(data):
            self.result.bytes_shared += len(data)
            table.append(mine.pack, mine.offset, mine.length, digest)
            return
        if len(self._pack.buf) + len(data) > PACK_SIZE:
            self._seal()
        pack = self._pack
        offset = len(pack.buf)
        pack.buf += data
        self._new.add(digest, pack.number, offset, len(data))
        table.append(pack.number, offset, len(data), digest)

    def _seal(self) -> None:
        pack, self._pack = self._pack, self._open_pack()
        if not pack.buf:
            return
        data = bytes(pack.buf)
        pack.buf = bytearray()
        self._slots.acquire()  # at most IN_FLIGHT packs wait for their upload
        pack.future = self._uploads.submit(self._upload, data)

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
        names: list[str] = []
        for pack in self._packs:
            if isinstance(pack, str):
                names.append(pack)
            elif pack.future is None:
                names.append("")  # opened, never filled: no chunk names it
            else:
                digest, size, sent = pack.future.result()
                self._sizes[digest] = size
                names.append(digest)
                self.result.bytes_sent += size if sent else 0
                self.result.packs_sent += int(sent)
                self.result.packs_skipped += int(not sent)
        used: set[str] = set()
        for entry, digest, table in self._files:
            index = _index(entry, digest, table, names)
            data = index.encode()
            layer = index_layer(index, data, executable=entry.executable)
            if self.backend.blob_size(self.repo, layer.digest) != layer.size:
                source = BlobSource(digest=layer.digest, size=layer.size, opener=partial(io.BytesIO, data))
                self.backend.upload_blob(self.repo, source)
                self.result.bytes_sent += layer.size
            self.result.indexes.append((entry, layer))
            self.result.digests.append((digest, entry.size))
            used.update(index.packs)
        self.result.packs = [Descriptor(media.CHUNK_PACK, d, self._sizes[d]) for d in sorted(used)]
        return self.result

    def close(self) -> None:
        self._uploads.shutdown(wait=True, cancel_futures=True)


def _index(entry: FileEntry, digest: str, table: ChunkTable, names: list[str]) -> ChunkIndex:
    """The file's index: its table's push-wide pack numbers renumbered in order of use."""
    order: dict[int, int] = {}
    for number in table.packs:
        if number not in order:
            order[number] = len(order)
    for row in range(len(table)):
        table.packs[row] = order[table.packs[row]]
    packs = tuple(names[number] for number in order)
    return ChunkIndex(entry.relpath, entry.size, digest, CHUNKING, packs, table)


def push_files(
    backend: Backend,
    repo: str,
    files: list[FileEntry],
    *,
    parents: list[str],
    tag: str | None,
    progress: ProgressSink,
    cache: DigestCache,
    whole: WholeUpload,
) -> ChunkedResult:
    """Push files in the chunked form, deduplicated against what the repository holds
    (the parents' chunks, the tag's and the newest checkpoints'; a file the digest cache
    knows, under whatever tag the repository holds it): packs and indexes are
    in the repository when this returns; the caller writes the manifest. whole: how the
    caller sends a file as one blob (a file with nothing to dedup against is its own pack)."""
    cached = [cache.lookup(entry.path) for entry in files]
    digests = {hit[0] for entry, hit in zip(files, cached, strict=True) if hit is not None and hit[1] == entry.size}
    known = gather(backend, repo, parents=parents, tag=tag, files=digests)
    job = ChunkedPush(backend, repo, known, progress, whole)
    try:
        with Chunker() as chunker:
            for entry, hit in zip(files, cached, strict=True):
                job.add_file(entry, chunker, cache, hit)
        return job.finish()
    finally:
        job.close()
