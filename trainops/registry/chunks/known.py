"""The chunks a repository already holds, as far as a push needs to know them.

Sources: the manifests of the lineage parents, the manifest the tag names now, and the
newest `step-N` checkpoints of the repository (by N) — never a listing of every blob. Then,
whatever the tags are called: when a file the digest cache knows is in none of those, or
when they hold no chunk at all, the manifests of the repository's other tags are read
(small documents; a chunk index only of a manifest that has the file, or of the newest
chunked ones) until the file is found. Chunk indexes are fetched once and cached on disk
by digest (verified on every read), so a watcher pushing checkpoint after checkpoint
reads each index once. A pack is reused only after one HEAD confirms the repository
still has it whole.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import IntegrityError, NotFoundError, TrainopsError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends.base import Backend, Descriptor
from trainops.registry.chunks.index import MAX_INDEX, ChunkIndex, check_against, decode, files_of, packs_of
from trainops.registry.chunks.table import DigestTable
from trainops.registry.digestcache import cache_dir

logger = logging.getLogger(__name__)
NEWEST = 4  # newest step-N checkpoints a push dedups against, beside its lineage parents
SCAN = 256  # other tags' manifests read for the newest chunked ones, when nothing else is known
_STEP = re.compile(r"step-(\d+)\Z")


@dataclass(frozen=True, slots=True)
class Location:
    pack: str  # digest
    offset: int
    length: int


def read_index(backend: Backend, repo: str, layer: Descriptor, where: str) -> ChunkIndex:
    """A chunk index blob, from the local cache when a verified copy is there, else fetched
    (at most MAX_INDEX bytes) and verified against its digest, then cached."""
    if layer.size > MAX_INDEX:
        raise IntegrityError(f"{where}: its chunk index is {layer.size} bytes, over the {MAX_INDEX}-byte limit")
    cached = cache_dir() / "chunk-indexes" / layer.digest[7:]
    data = None
    try:
        data = cached.read_bytes()
        if "sha256:" + hashlib.sha256(data).hexdigest() != layer.digest:
            data = None
    except OSError:
        pass
    if data is None:
        data = backend.read_range(repo, layer.digest, 0, layer.size)
        if len(data) != layer.size or "sha256:" + hashlib.sha256(data).hexdigest() != layer.digest:
            raise IntegrityError(
                f"{where}: its chunk index does not match its digest {layer.digest[:19]}",
                hint="the stored blob is corrupt; nothing was written",
            )
        _cache(cached, data)
    return decode(data, where)


def _cache(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs a fetch next time


class KnownChunks:
    """chunk sha256 → where it is in a pack of the repository (a DigestTable: flat arrays,
    about 56 bytes a chunk), and the indexes of whole files by digest."""

    def __init__(self, backend: Backend, repo: str) -> None:
        self.backend, self.repo = backend, repo
        self.chunks = DigestTable()  # rows name packs by their number in pack_names
        self.pack_names: list[str] = []
        self._pack_numbers: dict[str, int] = {}
        self.pack_sizes: dict[str, int] = {}
        self._confirmed: dict[str, bool] = {}
        self.manifests: list[str] = []
        self.files: dict[str, ChunkIndex] = {}  # whole-file digest → an index of that file

    def add_manifest(self, digest: str, parsed: ParsedManifest | None = None) -> None:
        """Learn the chunks of one manifest of the repository (chunked or not); parsed: the
        manifest when the caller has just read it."""
        if digest in self.manifests:
            return
        self.manifests.append(digest)
        if parsed is None:
            parsed = parse_manifest(self.backend.get_manifest(self.repo, digest))
        packs = packs_of(parsed)
        for view in files_of(parsed, digest[:19]):
            if not view.chunked:
                continue
            where = f"{self.repo}@{digest[:19]}: {view.path}"
            index = read_index(self.backend, self.repo, view.layer, where)
            check_against(index, view.layer, packs, where)
            self.files.setdefault(index.digest, index)
            self.add_index(index, {name: packs[name].size for name in index.packs})

    def add_index(self, index: ChunkIndex, sizes: dict[str, int]) -> None:
        """Learn where the chunks of one (checked) index are; sizes: of its packs."""
        numbers = [self.pack_number(name, sizes[name]) for name in index.packs]
        table = index.chunks
        for row in range(len(table)):
            self.chunks.add(table.digest(row), numbers[table.packs[row]], table.offsets[row], table.lengths[row])

    def pack_number(self, name: str, size: int) -> int:
        number = self._pack_numbers.get(name)
        if number is None:
            number = self._pack_numbers[name] = len(self.pack_names)
            self.pack_names.append(name)
            self.pack_sizes[name] = size
        return number

    def find(self, digest: bytes) -> Location | None:
        """Where a chunk already is, if its pack is still in the repository (one HEAD per pack)."""
        found = self.chunks.get(digest)
        if found is None:
            return None
        pack = self.pack_names[found.pack]
        return Location(pack, found.offset, found.length) if self.present(pack) else None

    def present(self, pack: str) -> bool:
        ok = self._confirmed.get(pack)
        if ok is None:
            ok = self.backend.blob_size(self.repo, pack) == self.pack_sizes[pack]
            self._confirmed[pack] = ok
        return ok

    def whole_file(self, digest: str) -> ChunkIndex | None:
        """An index of a file with this digest whose packs are all still there: the file need
        not be read again (its digest came from the digest cache)."""
        index = self.files.get(digest)
        if index is None or not all(self.present(pack) for pack in index.packs):
            return None
        return index


def gather(
    backend: Backend,
    repo: str,
    *,
    parents: list[str],
    tag: str | None,
    files: Collection[str] = (),
    newest: int = NEWEST,
) -> KnownChunks:
    """The chunks of the parents (digests), the tag's current manifest and the newest step-N
    checkpoints of repo; then, whatever the tags are called, those of the other tagged
    manifests that hold a file of `files` (whole-file digests the digest cache knows) not
    found yet, or of the newest chunked ones when nothing was found at all. A source that
    cannot be read is skipped (it only costs reuse)."""
    known = KnownChunks(backend, repo)
    try:
        tags = backend.list_tags(repo)
    except NotFoundError:
        return known
    steps = sorted(((int(m.group(1)), t) for t in tags if (m := _STEP.match(t))), reverse=True)
    first = ([tag] if tag and tag in tags else []) + [t for _, t in steps[:newest]]
    sources = list(parents) + [d for name in first if (d := _target(backend, repo, name)) is not None]
    for digest in sources:
        _learn(known, digest)
    missing = set(files) - set(known.files)
    if missing or not len(known.chunks):
        _search(known, [t for t in tags if t not in first], missing, newest)
    return known


def _target(backend: Backend, repo: str, tag: str) -> str | None:
    try:
        return backend.get_manifest(repo, tag).digest
    except NotFoundError:
        return None


def _learn(known: KnownChunks, digest: str, parsed: ParsedManifest | None = None) -> None:
    try:
        known.add_manifest(digest, parsed)
    except (NotFoundError, IntegrityError) as err:  # gone, or not this repository's
        logger.debug("not deduplicating against %s: %s", digest[:19], err)
    except TrainopsError as err:
        logger.warning("not deduplicating against %s: %s", digest[:19], err)


def _search(known: KnownChunks, tags: list[str], missing: set[str], newest: int) -> None:
    """Read the manifests of tags (each once) until every file of `missing` is found, learning
    each manifest that has one of them; when the known sources hold no chunk at all, learn
    the newest (by creation time) `newest` chunked manifests among them as well."""
    backend, repo = known.backend, known.repo
    targets = backend.tag_targets(repo) or {}
    chunked: list[tuple[str, str, ParsedManifest]] = []  # (created, digest, manifest)
    want_newest = not len(known.chunks)
    seen = set(known.manifests)
    for read, name in enumerate(sorted(tags, reverse=True)):
        if not missing and (not want_newest or read >= SCAN):
            break
        try:
            manifest = backend.get_manifest(repo, targets.get(name) or name)
            parsed = parse_manifest(manifest)
        except TrainopsError as err:
            logger.debug("not deduplicating against tag %s: %s", name, err)
            continue
        if parsed.digest in seen:
            continue
        seen.add(parsed.digest)
        held = {
            layer.annotations.get(media.A_CHUNKS_DIGEST, "")
            for layer in parsed.layers
            if layer.media_type == media.CHUNK_INDEX
        }
        if held & missing:
            _learn(known, parsed.digest, parsed)
            missing -= set(known.files)
        elif held and want_newest:
            chunked.append((parsed.created or "", parsed.digest, parsed))
    if want_newest:
        for _, digest, parsed in sorted(chunked, key=lambda c: c[0], reverse=True)[:newest]:
            _learn(known, digest, parsed)
