"""Content-defined chunks of a file, streamed with flat memory.

FastCDC 2020 (pyfastcdc's Cython build: measured fastest of the PyPI candidates, see the
README's Performance section) with Xet's bounds: 8 KiB minimum, 128 KiB maximum, a
64 KiB average. A safetensors file is first cut at its tensor boundaries (from the header:
the header is one segment, each tensor another), and chunked within each segment, so a
tensor that did not change yields the same chunks whatever its neighbours did. A file is
read in blocks of 8 MiB; the last chunk of a block, which may have been cut only because
the block ended, is carried into the next block, so the cuts are those of the whole
segment. The chunks' sha256 are computed on two threads, half a block each (hashlib
releases the GIL).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from trainops.errors import InputError
from trainops.modelfiles.safetensors import read_file_header
from trainops.registry.chunks.table import ChunkTable

if TYPE_CHECKING:
    from pyfastcdc.cy import FastCDC

MIN_CHUNK = 8 * 1024
AVG_CHUNK = 64 * 1024
MAX_CHUNK = 128 * 1024
BLOCK = 8 * 1024 * 1024
CHUNKING = f"fastcdc2020/{MIN_CHUNK}-{AVG_CHUNK}-{MAX_CHUNK}"  # recorded in each chunk index
SEGMENTS = ("tensors", "whole")  # safetensors files cut at tensor boundaries first, or not
DEFAULT_SEGMENTS = "tensors"  # measured: more reuse than "whole" on bench/dedup.py's fine-tune series


@dataclass(frozen=True, slots=True)
class Chunk:
    offset: int  # in the file
    data: memoryview
    digest: bytes  # sha256, 32 bytes


def _cdc() -> FastCDC:
    try:
        from pyfastcdc.cy import FastCDC
    except ImportError:  # pragma: no cover - the wheel ships the extension
        raise InputError(
            "chunked pushes need pyfastcdc's compiled extension",
            hint="pip install 'pyfastcdc>=0.3' (a wheel for this platform)",
        ) from None
    # pyfastcdc's average is avg_size + min_size (its docs, "Cut-Point Skipping")
    return FastCDC(AVG_CHUNK - MIN_CHUNK, min_size=MIN_CHUNK, max_size=MAX_CHUNK)


def segments(path: Path, size: int, mode: str = "tensors") -> list[tuple[int, int]]:
    """(start, end) spans of the file that chunks never cross: the safetensors header and
    each tensor's bytes (in file order) for a valid safetensors file, else the whole file."""
    if mode == "tensors" and path.name.endswith(".safetensors"):
        try:
            header = read_file_header(path)
        except InputError:
            return [(0, size)]  # not a valid safetensors file: chunked as plain bytes
        base = 8 + header.header_size
        cuts = sorted({base + end for t in header.tensors.values() for end in t.data_offsets} | {0, base, size})
        return [(a, b) for a, b in pairwise(cuts) if b > a]
    return [(0, size)] if size else []


class Chunker:
    """Cuts files; one per push (it owns the hashing threads). Not thread-safe."""

    def __init__(self, *, threads: int = 2, mode: str | None = None) -> None:
        self._cdc = _cdc()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="chunk-hash")
        self.mode = mode or DEFAULT_SEGMENTS

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Chunker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chunks(self, fh: BinaryIO, path: Path, size: int) -> Iterator[Chunk]:
        """Every chunk of the open file fh (size bytes), in order; each chunk's data is valid
        until the next block is read, so consumers copy what they keep."""
        for start, end in segments(path, size, self.mode):
            fh.seek(start)
            yield from self._segment(fh, start, end)

    def _segment(self, fh: BinaryIO, start: int, end: int) -> Iterator[Chunk]:
        carry = b""
        position = start  # file offset of the buffer's first byte
        left = end - start
        while left > 0 or carry:
            data = fh.read(min(BLOCK, left)) if left > 0 else b""
            if left > 0 and not data:
                raise InputError(f"{getattr(fh, 'name', 'file')} shrank while it was chunked")
            left -= len(data)
            buf = memoryview(carry + data) if carry else memoryview(data)
            cuts = [(c.offset, c.length) for c in self._cdc.cut_buf(buf)]
            if left > 0 and cuts:  # the block's last cut may be an artefact of the block's end
                last_offset, _ = cuts.pop()
                carry = bytes(buf[last_offset:])
            else:
                carry = b""
            views = [buf[o : o + n] for o, n in cuts]
            half = len(views) // 2  # a task per thread, not per chunk: futures cost 16 % of the CPU
            digests = [d for part in self._pool.map(_sha256_all, (views[:half], views[half:])) for d in part]
            for (o, _), view, digest in zip(cuts, views, digests, strict=True):
                yield Chunk(position + o, view, digest)
            consumed = sum(n for _, n in cuts)
            position += consumed

    def table(self, path: Path, size: int, stop: threading.Event) -> ChunkTable:
        """The chunks of a file as a table (file offsets, lengths, sha256; pack 0), for a
        file sent whole; stops early, returning what it has, once stop is set."""
        table = ChunkTable()
        with path.open("rb") as fh:
            for chunk in self.chunks(fh, path, size):
                if stop.is_set():
                    break
                table.append(0, chunk.offset, len(chunk.data), chunk.digest)
        return table


def _sha256_all(views: list[memoryview]) -> list[bytes]:
    return [hashlib.sha256(view).digest() for view in views]
