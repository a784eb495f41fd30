"""The chunk list and chunk lookup tables (trainops/registry/chunks/table.py) and the chunk
index's encoding: what they return, and that they hold flat arrays, not an object per chunk.

The memory checks count what tracemalloc sees allocated while an index is decoded or a
table filled: an object per chunk (tuple or dataclass, its ints, its digest, a dict slot)
costs about 1 KB; the arrays about 48–64 bytes.
"""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest

from trainops.errors import IntegrityError
from trainops.registry.artifact import canonical_json
from trainops.registry.chunks.index import ChunkIndex, decode
from trainops.registry.chunks.table import ChunkTable, DigestTable


def _index(rows: int) -> ChunkIndex:
    table = ChunkTable()
    offset = 0
    for row in range(rows):
        length = 8192 + (row * 7919) % 120000
        table.append(row % 3, offset, length, os.urandom(32))
        offset += length
    packs = tuple(f"sha256:{i:064x}" for i in range(3))
    return ChunkIndex("model.safetensors", offset, "sha256:" + "a" * 64, "fastcdc2020/8192-65536-131072", packs, table)


def _as_json(index: ChunkIndex) -> dict[str, object]:
    return {
        "schemaVersion": 1,
        "path": index.path,
        "size": index.size,
        "digest": index.digest,
        "chunking": index.chunking,
        "packs": list(index.packs),
        "chunks": [[c.pack, c.offset, c.length, c.digest.hex()] for c in index.chunks],
    }


def test_the_encoding_is_the_canonical_json_of_the_version_1_document() -> None:
    index = _index(500)
    assert index.encode() == canonical_json(_as_json(index))
    empty = ChunkIndex("e.bin", 0, "sha256:" + "b" * 64, "", (), ChunkTable())
    assert empty.encode() == canonical_json(_as_json(empty))


def test_decoding_gives_back_every_row_from_canonical_and_from_any_other_json_layout() -> None:
    index = _index(300)
    want = [(c.pack, c.offset, c.length, c.digest) for c in index.chunks]
    pretty = json.dumps(_as_json(index), indent=2).encode()  # not canonical: parsed the slow way
    for data in (index.encode(), pretty):
        got = decode(data, "ref: model.safetensors")
        assert [(c.pack, c.offset, c.length, c.digest) for c in got.chunks] == want
        assert (got.path, got.size, got.digest, got.packs) == (index.path, index.size, index.digest, index.packs)


def test_a_repeated_chunks_key_reads_as_json_reads_it_the_last_one() -> None:
    index = _index(4)
    data = index.encode()
    fake = b'"chunks":[[0,0,1,"' + b"0" * 64 + b'"]],'
    got = decode(data.replace(b'"digest"', fake + b'"digest"', 1), "ref: f")  # a second, later "chunks"
    assert [c.length for c in got.chunks] == [1]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d.replace(b"[2,", b"[7,", 1), "names pack 7"),
        (lambda d: d.replace(b'"schemaVersion":1', b'"schemaVersion":3'), "not a version 1 chunk index"),
        (lambda d: d.replace(b",8192,", b",0,", 1), "outside 1..16777216"),
        (lambda d: d.replace(b"[0,0,", b"[0,99999999999999999999999,", 1), "malformed"),
    ],
)
def test_a_bad_row_is_refused_naming_the_file(edit: object, says: str) -> None:
    data = _index(10).encode()
    bad = edit(data)  # type: ignore[operator]
    assert bad != data
    with pytest.raises(IntegrityError) as caught:
        decode(bad, "ref: model.safetensors")
    assert "ref: model.safetensors: the chunk index is malformed" in str(caught.value)
    assert says in str(caught.value)


def test_decoding_holds_tens_of_bytes_a_chunk_not_an_object_per_chunk() -> None:
    rows = 20000  # about 1.2 GiB of file at 64 KiB chunks
    data = _index(rows).encode()
    tracemalloc.start()
    try:
        got = decode(data, "ref: f")
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(got.chunks) == rows
    assert held / rows < 64, held / rows  # the four arrays: 48 bytes a row and their slack
    assert peak / rows < 120, peak / rows  # and the emptied document beside them, nothing per row


def test_the_lookup_finds_every_digest_it_was_given_keeps_the_first_and_nothing_else() -> None:
    table = DigestTable()
    digests = [os.urandom(32) for _ in range(5000)]  # several doublings of the slots
    for i, digest in enumerate(digests):
        assert table.add(digest, i % 5, i * 65536, 65536 - i % 100)
    assert not table.add(digests[10], 4, 1, 1)  # already known: the first place stays
    assert len(table) == len(digests)
    for i, digest in enumerate(digests):
        found = table.get(digest)
        assert found is not None and (found.pack, found.offset, found.length) == (i % 5, i * 65536, 65536 - i % 100)
    assert all(table.get(os.urandom(32)) is None for _ in range(2000))
    with pytest.raises(ValueError, match="32 bytes"):
        table.add(b"short", 0, 0, 1)


def test_the_lookup_holds_tens_of_bytes_an_entry() -> None:
    digests = [os.urandom(32) for _ in range(20000)]
    tracemalloc.start()
    try:
        table = DigestTable()
        for i, digest in enumerate(digests):
            table.add(digest, 0, i, 1)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / len(digests) < 80, held / len(digests)  # 48 in the rows, 4–16 in the slots


def _table_of(data: bytes, length: int) -> ChunkTable:
    import hashlib

    table = ChunkTable()
    for offset in range(0, len(data), length):
        piece = data[offset : offset + length]
        table.append(0, offset, len(piece), hashlib.sha256(piece).digest())
    return table


def test_chunks_counted_before_they_reach_the_file_are_checked_again_once_it_is_whole(tmp_path: object) -> None:
    """The check that follows a whole-pack download reads behind the download's progress; a
    backend may count bytes it still buffers. Rows read short then are read again after the
    download, so only the finished file decides."""
    from pathlib import Path

    from trainops.registry.chunks.rebuild import VERIFY_ROWS, _Follower

    data = os.urandom(3 * VERIFY_ROWS * 1024 + 100)
    path = Path(str(tmp_path)) / "part"
    follower = _Follower(path, _table_of(data, 1024))
    with path.open("wb") as out:
        follower.start()
        out.write(data[: len(data) // 3])
        out.flush()
        follower.advance(len(data))  # counted ahead of what the file holds
        assert follower.deferred.wait(timeout=30)  # the row it read short waits for the whole file
        out.write(data[len(data) // 3 :])
    assert follower.finish() is None


def test_a_chunk_that_does_not_match_in_the_finished_file_is_named_by_its_row(tmp_path: object) -> None:
    from pathlib import Path

    from trainops.registry.chunks.rebuild import VERIFY_ROWS, _Follower

    data = bytearray(os.urandom(2 * VERIFY_ROWS * 1024))
    table = _table_of(bytes(data), 1024)
    data[VERIFY_ROWS * 1024 + 5 * 1024 + 7] ^= 1  # one bit of row VERIFY_ROWS + 5
    path = Path(str(tmp_path)) / "part"
    path.write_bytes(bytes(data))
    follower = _Follower(path, table)
    follower.start()
    follower.advance(len(data))
    assert follower.finish() == VERIFY_ROWS + 5
