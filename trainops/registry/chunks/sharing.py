"""How many bytes one artifact shares with another, chunk by chunk.

A file of `new` counts whole when `old` has a file of the same digest; else each chunk of
a chunked file counts when `old` holds a chunk of the same sha256 (in a chunked file of
its own). Plain files share nothing below the file level.
"""

from __future__ import annotations

from trainops.registry.artifact import ParsedManifest
from trainops.registry.backends.base import Backend
from trainops.registry.chunks.index import files_of
from trainops.registry.chunks.known import read_index
from trainops.registry.chunks.table import DigestTable


def _chunk_digests(backend: Backend, repo: str, parsed: ParsedManifest) -> DigestTable:
    out = DigestTable()
    for view in files_of(parsed, parsed.digest[:19]):
        if view.chunked:
            index = read_index(backend, repo, view.layer, f"{parsed.digest[:19]}: {view.path}")
            table = index.chunks
            for row in range(len(table)):
                out.add(table.digest(row), 0, 0, table.lengths[row])
    return out


def shared_bytes(
    backend: Backend, repo: str, *, old: ParsedManifest, new: ParsedManifest, old_repo: str | None = None
) -> int:
    """Bytes of new's files found in old (whole files by digest, else chunks by sha256);
    indexes are read through the chunk-index cache."""
    old_files = {view.digest for view in files_of(old, old.digest[:19])}
    old_chunks: DigestTable | None = None
    shared = 0
    for view in files_of(new, new.digest[:19]):
        if view.digest in old_files:
            shared += view.size
        elif view.chunked:
            if old_chunks is None:
                old_chunks = _chunk_digests(backend, old_repo or repo, old)
            index = read_index(backend, repo, view.layer, f"{new.digest[:19]}: {view.path}")
            table = index.chunks
            shared += sum(table.lengths[row] for row in range(len(table)) if old_chunks.get(table.digest(row)))
    return shared
