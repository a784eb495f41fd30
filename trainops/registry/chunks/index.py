"""The chunk index of one file, and the file view of a manifest (plain and chunked files).

A chunk index is canonical JSON (registry/SPEC.md, "Chunked checkpoints"):

    {"schemaVersion": 1, "path": "model.safetensors", "size": 268435456,
     "digest": "sha256:…", "chunking": "fastcdc2020/8192-65536-131072",
     "packs": ["sha256:…", …], "chunks": [[0, 0, 65536, "<sha256 hex>"], …]}

`chunks` lists the file's chunks in order, each as [index into packs, offset in the pack,
length, sha256 of the chunk]; the file's bytes are the chunks' bytes concatenated. In
memory the list is a ChunkTable (flat arrays, table.py): no object per chunk.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from trainops.errors import IntegrityError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, canonical_json
from trainops.registry.backends.base import Descriptor
from trainops.registry.chunks.table import ChunkTable

MAX_INDEX = 256 * 1024 * 1024  # bytes of one chunk index (about 2 TiB of file at 64 KiB chunks)
MAX_CHUNK_LENGTH = 16 * 1024 * 1024  # the longest chunk a reader accepts (memory stays bounded)
_HEX = re.compile(r"[0-9a-f]{64}\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_CHUNKS_KEY = b'"chunks":['
_ITEM = re.compile(rb'\[(\d{1,10}),(\d{1,20}),(\d{1,10}),"([0-9a-f]{64})"\]')


@dataclass(frozen=True)
class ChunkIndex:
    path: str
    size: int
    digest: str  # sha256:… of the whole file
    chunking: str
    packs: tuple[str, ...]
    chunks: ChunkTable  # rows: (index into packs, offset in the pack, length, sha256)

    def encode(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces), the chunk list written row by row so no
        object per chunk is made: the same bytes as canonical_json of the whole document."""
        head = canonical_json(
            {
                "schemaVersion": 1,
                "path": self.path,
                "size": self.size,
                "digest": self.digest,
                "chunking": self.chunking,
                "packs": list(self.packs),
                "chunks": [],
            }
        )
        at = head.index(_CHUNKS_KEY) + len(_CHUNKS_KEY)  # "chunking" (ours) is the only key before
        out = bytearray(head[:at])
        table = self.chunks
        for row in range(len(table)):
            if row:
                out += b","
            out += b'[%d,%d,%d,"%s"]' % (
                table.packs[row],
                table.offsets[row],
                table.lengths[row],
                table.digest(row).hex().encode(),
            )
        out += head[at:]
        return bytes(out)


def decode(data: bytes, where: str) -> ChunkIndex:
    """A chunk index from its bytes; IntegrityError naming `where` (ref: file) if malformed.
    The canonical chunk list is parsed row by row into flat arrays (no object per chunk);
    anything else falls back to a full JSON parse, which accepts the same documents."""
    try:
        fast = _scan_chunks(data)
        body = json.loads(fast[0]) if fast is not None else None
        if not isinstance(body, dict) or body.get("chunks") != []:  # not canonical: parse it all
            body, fast = json.loads(data), None
        if not isinstance(body, dict) or body.get("schemaVersion") != 1:
            raise ValueError("not a version 1 chunk index")
        packs = body["packs"]
        if not isinstance(packs, list) or not all(isinstance(p, str) and _DIGEST.match(p) for p in packs):
            raise ValueError("packs must be a list of sha256 digests")
        chunks = fast[1] if fast is not None else _table(body["chunks"])
        _check_rows(chunks, len(packs))
        path, size, digest = body["path"], body["size"], body["digest"]
        if not isinstance(path, str) or not isinstance(digest, str) or not _DIGEST.match(digest):
            raise ValueError("path and digest must be strings, the digest sha256:<hex>")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("size must be a count of bytes")
        chunking = body.get("chunking", "")
        if not isinstance(chunking, str):
            raise ValueError("chunking must be a string")
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError) as err:
        raise IntegrityError(
            f"{where}: the chunk index is malformed: {err}", hint="the artifact is damaged; nothing was written"
        ) from None
    return ChunkIndex(path, size, digest, chunking, tuple(packs), chunks)


def _scan_chunks(data: bytes) -> tuple[bytes, ChunkTable] | None:
    """The canonical chunk list read into a table, and the document with that list emptied;
    None where the list is not in the canonical form. (A quote inside a JSON string is
    escaped, so the key's bytes cannot be found inside a string value.)"""
    start = data.find(_CHUNKS_KEY)
    if start < 0:
        return None
    pos = start + len(_CHUNKS_KEY)
    table = ChunkTable()
    if data[pos : pos + 1] != b"]":
        while (item := _ITEM.match(data, pos)) is not None:
            table.append(int(item[1]), int(item[2]), int(item[3]), bytes.fromhex(item[4].decode()))
            pos = item.end() + 1
            if data[pos - 1 : pos] != b",":
                break
        else:
            return None
        if data[pos - 1 : pos] != b"]":
            return None
        pos -= 1
    return data[:start] + b'"chunks":[]' + data[pos + 1 :], table


def _table(items: Any) -> ChunkTable:
    if not isinstance(items, list):
        raise ValueError("chunks must be a list")
    table = ChunkTable()
    for item in items:
        if not isinstance(item, list) or len(item) != 4:
            raise ValueError("each chunk must be [pack, offset, length, sha256 hex]")
        pack, offset, length, digest = item
        for value in (pack, offset, length):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"chunk field {value!r} is not a non-negative integer")
        if not isinstance(digest, str) or not _HEX.match(digest):
            raise ValueError(f"chunk digest {str(digest)[:70]!r} is not 64 lowercase hex digits")
        if not 0 < length <= MAX_CHUNK_LENGTH:  # before it goes into a 32-bit array
            raise ValueError(f"a chunk of {length} bytes is outside 1..{MAX_CHUNK_LENGTH}")
        table.append(pack, offset, length, bytes.fromhex(digest))
    return table


def _check_rows(table: ChunkTable, packs: int) -> None:
    if table.packs and max(table.packs) >= packs:
        raise ValueError(f"a chunk names pack {max(table.packs)}, but the index lists {packs}")
    if table.lengths and not (min(table.lengths) > 0 and max(table.lengths) <= MAX_CHUNK_LENGTH):
        raise ValueError(f"a chunk's length is outside 1..{MAX_CHUNK_LENGTH}")


def check_against(index: ChunkIndex, layer: Descriptor, packs: dict[str, Descriptor], where: str) -> None:
    """The index agrees with its layer's annotations and names only packs of the manifest,
    within their sizes, covering exactly the file's size. IntegrityError otherwise."""

    def bad(problem: str) -> IntegrityError:
        return IntegrityError(f"{where}: {problem}", hint="the artifact is damaged or hostile; nothing was written")

    if index.digest != layer.annotations.get(media.A_CHUNKS_DIGEST):
        raise bad(f"the chunk index says digest {index.digest[:19]}, the manifest another")
    if str(index.size) != layer.annotations.get(media.A_CHUNKS_SIZE):
        raise bad(f"the chunk index says {index.size} bytes, the manifest another size")
    for digest in index.packs:
        if digest not in packs:
            raise bad(f"the chunk index names pack {digest[:19]}, which is not a layer of the manifest")
    table = index.chunks
    sizes = [packs[name].size for name in index.packs]
    for pack, offset, length in zip(table.packs, table.offsets, table.lengths, strict=True):
        if offset + length > sizes[pack]:
            raise bad(
                f"a chunk at {offset}+{length} runs past the end of pack {index.packs[pack][:19]} ({sizes[pack]} bytes)"
            )
    total = table.total()
    if total != index.size:
        raise bad(f"the chunks add up to {total} bytes, not the file's {index.size}")


@dataclass(frozen=True)
class FileView:
    """A file of an artifact as a reader sees it, plain (one layer) or chunked (an index)."""

    path: str
    size: int
    digest: str  # of the whole file
    media_type: str  # the ModelPack layer type of the file
    layer: Descriptor  # the file's blob, or its chunk index
    chunked: bool
    mode: str | None  # "0755" for an executable file


def is_chunked(parsed: ParsedManifest) -> bool:
    return any(layer.media_type == media.CHUNK_INDEX for layer in parsed.layers)


def packs_of(parsed: ParsedManifest) -> dict[str, Descriptor]:
    return {layer.digest: layer for layer in parsed.layers if layer.media_type == media.CHUNK_PACK}


def files_of(parsed: ParsedManifest, where: str) -> list[FileView]:
    """The files of an artifact: a plain layer each, or a chunk index each; packs are not
    files. Paths are not checked here (a pull checks them with safe_relpath); a chunked file's
    digest and size come from its index layer's annotations (checked against the index, and
    against the bytes, when it is pulled)."""
    out: list[FileView] = []
    kind = parsed.kind
    for i, layer in enumerate(parsed.layers):
        if layer.media_type == media.CHUNK_PACK:
            continue
        mode = layer.annotations.get(media.A_FILE_MODE)
        if layer.media_type != media.CHUNK_INDEX:
            path = parsed.file_path(layer, i)
            out.append(FileView(path, layer.size, layer.digest, layer.media_type, layer, False, mode))
            continue
        path = layer.annotations.get(media.A_CHUNKS_FILEPATH) or f"layer-{i:04d}-{layer.digest[7:19]}"
        digest, size = layer.annotations.get(media.A_CHUNKS_DIGEST, ""), layer.annotations.get(media.A_CHUNKS_SIZE, "")
        if not _DIGEST.match(digest) or not size.isdigit():
            raise IntegrityError(
                f"{where}: {path}: its chunk index layer lacks a valid file digest or size",
                hint="the artifact is damaged; nothing was written",
            )
        media_type = media.layer_media_type(path, kind)
        out.append(FileView(path, int(size), digest, media_type, layer, True, mode))
    return out


def index_layer(index: ChunkIndex, data: bytes, *, executable: bool) -> Descriptor:
    notes = {
        media.A_CHUNKS_FILEPATH: index.path,
        media.A_CHUNKS_DIGEST: index.digest,
        media.A_CHUNKS_SIZE: str(index.size),
    }
    if executable:
        notes[media.A_FILE_MODE] = "0755"
    return Descriptor(media.CHUNK_INDEX, "sha256:" + hashlib.sha256(data).hexdigest(), len(data), notes)
