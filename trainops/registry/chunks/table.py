"""Chunk lists and chunk lookups as flat arrays: memory per chunk, not per Python object.

A 64 KiB chunk costs 48 bytes in a ChunkTable (pack number, offset, length, 32-byte
digest) and about 8 more in a DigestTable's slots, where one object per chunk (a tuple or
dataclass, its ints, its digest, a dict slot) cost about 1 KB: a push or pull of a 1 TiB
file keeps about 1 GB of them instead of 16 GB.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

DIGEST_SIZE = 32


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """One chunk, as a reader sees it (made on demand from a ChunkTable row)."""

    pack: int  # index into the pack list of whoever owns the table
    offset: int
    length: int
    digest: bytes  # 32 bytes


class ChunkTable:
    """Chunks in order: four parallel arrays. Iterating yields ChunkRef rows one at a time."""

    __slots__ = ("digests", "lengths", "offsets", "packs")

    def __init__(self) -> None:
        self.packs = array("I")
        self.offsets = array("Q")
        self.lengths = array("I")
        self.digests = bytearray()

    def append(self, pack: int, offset: int, length: int, digest: bytes) -> None:
        self.packs.append(pack)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.digests += digest

    def __len__(self) -> int:
        return len(self.lengths)

    def digest(self, row: int) -> bytes:
        return bytes(self.digests[row * DIGEST_SIZE : (row + 1) * DIGEST_SIZE])

    def row(self, row: int) -> ChunkRef:
        return ChunkRef(self.packs[row], self.offsets[row], self.lengths[row], self.digest(row))

    def __iter__(self) -> Iterator[ChunkRef]:
        return (self.row(i) for i in range(len(self)))

    def total(self) -> int:
        return sum(self.lengths)


class DigestTable:
    """digest → row of a ChunkTable, first one kept: open addressing over an array of row
    numbers (a digest is uniformly random, so its first 8 bytes are its hash), at most half
    full. No object per entry."""

    __slots__ = ("_mask", "_slots", "rows")

    def __init__(self) -> None:
        self.rows = ChunkTable()
        self._slots = array("i", [-1]) * 1024
        self._mask = len(self._slots) - 1

    def __len__(self) -> int:
        return len(self.rows)

    def _probe(self, digest: bytes) -> tuple[int, int]:
        """(slot, row): the slot holding digest's row, or the empty slot where it would go (row -1)."""
        slot = int.from_bytes(digest[:8], "little") & self._mask
        slots, digests = self._slots, self.rows.digests
        while (row := slots[slot]) != -1:
            if digests[row * DIGEST_SIZE : (row + 1) * DIGEST_SIZE] == digest:
                return slot, row
            slot = (slot + 1) & self._mask
        return slot, -1

    def get(self, digest: bytes) -> ChunkRef | None:
        _, row = self._probe(digest)
        return None if row == -1 else self.rows.row(row)

    def add(self, digest: bytes, pack: int, offset: int, length: int) -> bool:
        """Remember where a chunk is, unless its digest is known already (then False)."""
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"a chunk digest is {DIGEST_SIZE} bytes, not {len(digest)}")
        slot, row = self._probe(digest)
        if row != -1:
            return False
        self._slots[slot] = len(self.rows)
        self.rows.append(pack, offset, length, digest)
        if 2 * len(self.rows) > len(self._slots):
            self._grow()
        return True

    def _grow(self) -> None:
        self._slots = array("i", [-1]) * (2 * len(self._slots))
        self._mask = len(self._slots) - 1
        digests = self.rows.digests
        for row in range(len(self.rows)):
            slot, _ = self._probe(bytes(digests[row * DIGEST_SIZE : (row + 1) * DIGEST_SIZE]))
            self._slots[slot] = row
