"""The browser's SQLite index of one or more registries, refreshed incrementally.

Every manifest is immutable, so an artifact is read from its registry once: a refresh lists
each repository's tags with their digests through the Store's linear listing
(`listing.tagged_manifests`: on file:// one read of the tag index and one of each distinct
manifest), and fetches (and indexes) only manifests whose digest the index does not have yet. Tags that moved are
re-pointed, tags that vanished are dropped, artifacts no longer in the repository are
removed. Pruned records stand in the index for the artifacts they record (marked pruned),
as they do in a lineage walk. The index is a cache: deleting the file loses nothing.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import NotFoundError, TrainopsError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends.base import Descriptor, ManifestData, sha256_digest
from trainops.registry.chunks.index import files_of, is_chunked
from trainops.registry.chunks.sharing import shared_bytes
from trainops.registry.context import Registries
from trainops.registry.lineage import parse_artifact
from trainops.registry.listing import list_registry, tagged_manifests
from trainops.registry.reference import Reference
from trainops.registry.retention import tombstone
from trainops.registry.store import resolve

log = logging.getLogger(__name__)

CONFIG_LIMIT = 64 * 1024  # config blobs up to this size are kept in the index (shown on the artifact page)
_DIGITS = re.compile(r"(\d+)")

SCHEMA = """
CREATE TABLE IF NOT EXISTS repos (
  id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, registry TEXT NOT NULL, refreshed REAL
);
CREATE TABLE IF NOT EXISTS artifacts (
  repo_id INTEGER NOT NULL, digest TEXT NOT NULL, kind TEXT NOT NULL, artifact_type TEXT,
  media_type TEXT NOT NULL, created TEXT, size INTEGER NOT NULL, files INTEGER NOT NULL,
  step INTEGER, run_id TEXT, git_commit TEXT, metrics TEXT NOT NULL, annotations TEXT NOT NULL,
  lineage TEXT NOT NULL, subject TEXT, manifest TEXT NOT NULL, config TEXT, report TEXT,
  pruned INTEGER NOT NULL,
  stored TEXT NOT NULL,
  shared_with_parent INTEGER,
  PRIMARY KEY (repo_id, digest)
);
CREATE INDEX IF NOT EXISTS artifacts_stored ON artifacts (repo_id, stored);
CREATE INDEX IF NOT EXISTS artifacts_listing ON artifacts (repo_id, pruned, created);
CREATE INDEX IF NOT EXISTS artifacts_digest ON artifacts (digest);
CREATE INDEX IF NOT EXISTS artifacts_commit ON artifacts (git_commit);
CREATE INDEX IF NOT EXISTS artifacts_run ON artifacts (run_id);
CREATE INDEX IF NOT EXISTS artifacts_subject ON artifacts (subject);
CREATE TABLE IF NOT EXISTS tags (
  repo_id INTEGER NOT NULL, tag TEXT NOT NULL, digest TEXT NOT NULL, natural TEXT NOT NULL,
  PRIMARY KEY (repo_id, tag)
);
CREATE INDEX IF NOT EXISTS tags_order ON tags (repo_id, natural);
CREATE INDEX IF NOT EXISTS tags_digest ON tags (digest);
CREATE INDEX IF NOT EXISTS tags_repo_digest ON tags (repo_id, digest);
CREATE INDEX IF NOT EXISTS tags_tag ON tags (tag);
CREATE TABLE IF NOT EXISTS edges (
  repo_id INTEGER NOT NULL, child TEXT NOT NULL, parent TEXT NOT NULL, relation TEXT NOT NULL, ref TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS edges_parent ON edges (parent);
CREATE INDEX IF NOT EXISTS edges_child ON edges (child);
"""


def natural_key(tag: str) -> str:
    """A sort key under which step-9 comes before step-10 (numbers zero-padded to 20 digits)."""
    return _DIGITS.sub(lambda m: m.group(1).rjust(20, "0"), tag)


class Index:
    """The SQLite file and the lock that serializes writers; readers open their own connections."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        with self.connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(artifacts)")}
            if "shared_with_parent" not in columns:  # an index made before chunked checkpoints
                db.execute("ALTER TABLE artifacts ADD COLUMN shared_with_parent INTEGER")

    def connect(self) -> sqlite3.Connection:
        """This thread's connection (rows as sqlite3.Row)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.row_factory = sqlite3.Row
            self._local.db = db
        return db

    def is_empty(self) -> bool:
        return self.connect().execute("SELECT 1 FROM repos LIMIT 1").fetchone() is None

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock:
            db = self.connect()
            with db:
                yield db


@dataclass(frozen=True)
class RefreshResult:
    registries: list[str]
    repositories: int
    artifacts_added: int
    artifacts_removed: int
    tags_changed: int
    seconds: float
    errors: list[str]


def _row_of(parsed: ParsedManifest, data: ManifestData, config: str | None, pruned: bool) -> dict[str, Any]:
    lineage = parsed.lineage()
    files = files_of(parsed, parsed.digest[:19])  # a chunked artifact's files, not its packs
    return {
        "digest": parsed.digest,
        "kind": parsed.kind,
        "artifact_type": parsed.artifact_type,
        "media_type": parsed.media_type,
        "created": parsed.created,
        "size": sum(f.size for f in files),
        "files": len(files),
        "step": lineage.step,
        "run_id": lineage.run_id,
        "git_commit": lineage.git_commit,
        "metrics": json.dumps(lineage.metrics),
        "annotations": json.dumps(parsed.annotations),
        "lineage": json.dumps(lineage.as_json()),
        "subject": parsed.subject.digest if parsed.subject else None,
        "manifest": data.data.decode("utf-8", "replace"),
        "config": config,
        "pruned": 1 if pruned else 0,
    }


def _small_json(registries: Registries, repo: Reference, blob: Descriptor | None) -> str | None:
    """A blob as text when it is small (≤ CONFIG_LIMIT) and verified against its digest, else None."""

    if blob is None or blob.size > CONFIG_LIMIT:
        return None
    try:
        with registries.backend(repo).open_blob(repo.repository, blob.digest) as fh:
            data = fh.read(CONFIG_LIMIT + 1)
    except (NotFoundError, OSError):
        return None
    if sha256_digest(data) != blob.digest:
        log.warning("blob %s of %s does not match its digest; not shown", blob.digest, repo.repo_url)
        return None
    return data.decode("utf-8", "replace")


def _config_text(registries: Registries, repo: Reference, parsed: ParsedManifest) -> str | None:
    """The config blob when it is small JSON."""
    if parsed.config is None or not parsed.config.media_type.endswith("json"):
        return None
    return _small_json(registries, repo, parsed.config)


def _report_text(registries: Registries, repo: Reference, parsed: ParsedManifest) -> str | None:
    """An eval report's JSON file (its metrics, gates and verdict), when it has one small enough."""
    if parsed.annotations.get(media.A_BUNDLE_PREDICATE) == media.SLSA_PROVENANCE:
        return _provenance_text(registries, repo, parsed)
    if parsed.kind != "eval":
        return None
    for i, layer in enumerate(parsed.layers):
        if parsed.file_path(layer, i).endswith(".json"):
            return _small_json(registries, repo, layer)
    return None


def _provenance_text(registries: Registries, repo: Reference, parsed: ParsedManifest) -> str | None:
    """A provenance record's in-toto statement as JSON (out of its DSSE envelope, unverified:
    the browser has no key; `trainops release verify` checks it)."""
    from trainops.signing.provenance import peek_statement  # lazy: loads pydantic

    text = _small_json(registries, repo, parsed.layers[0]) if len(parsed.layers) == 1 else None
    statement = None if text is None else peek_statement(text.encode(), parsed.layers[0].media_type)
    return None if statement is None else json.dumps(statement)


def _shared_with_parent(registries: Registries, repo: Reference, parsed: ParsedManifest) -> int | None:
    """Bytes a chunked artifact shares with its first lineage parent, chunk by chunk, when
    that parent is in the same repository (chunk indexes read once, cached by digest)."""

    parents = parsed.lineage().parents
    if not parents or not is_chunked(parsed):
        return None
    backend = registries.backend(repo)
    try:
        old = parse_manifest(backend.get_manifest(repo.repository, parents[0].digest))
        return shared_bytes(backend, repo.repository, old=old, new=parsed)
    except TrainopsError as err:  # the parent is gone or elsewhere: nothing to say
        log.debug("no shared bytes for %s: %s", parsed.digest, err)
        return None


def _fetch(registries: Registries, repo: Reference, digest: str) -> tuple[ParsedManifest, ManifestData] | None:
    """Read a manifest by digest through the Store; None when it vanished meanwhile."""
    try:
        found = resolve(registries, ref=repo.with_digest(digest))
    except NotFoundError:
        return None
    return parse_artifact(registries, found.ref, found.manifest), found.manifest


def _insert(db: sqlite3.Connection, registries: Registries, repo_id: int, repo: Reference, item: Any) -> None:
    parsed, data = item
    record = tombstone.as_pruned(parsed)
    shown = record if record is not None else parsed
    config = None if record is not None else _config_text(registries, repo, parsed)
    row = _row_of(shown, data, config, pruned=record is not None)
    row["report"] = None if record is not None else _report_text(registries, repo, parsed)
    row["shared_with_parent"] = None if record is not None else _shared_with_parent(registries, repo, parsed)
    row["repo_id"] = repo_id
    row["stored"] = parsed.digest  # the manifest the repository holds (a pruned record's own digest)
    cols = ", ".join(row)
    db.execute(f"INSERT OR REPLACE INTO artifacts ({cols}) VALUES ({', '.join(':' + c for c in row)})", row)
    db.execute("DELETE FROM edges WHERE repo_id = ? AND child = ?", (repo_id, shown.digest))
    lineage = shown.lineage()
    edges = [(p.digest, p.relation, p.ref) for p in lineage.parents]
    if lineage.image_digest and lineage.image_digest not in {e[0] for e in edges}:
        edges.append((lineage.image_digest, "image", ""))  # the image it ran in (lineage imageDigest)
    if shown.subject is not None and shown.subject.digest not in {e[0] for e in edges}:
        edges.append((shown.subject.digest, "describes", repo.repo_url))
    db.executemany(
        "INSERT INTO edges (repo_id, child, parent, relation, ref) VALUES (?, ?, ?, ?, ?)",
        [(repo_id, shown.digest, parent, relation, ref) for parent, relation, ref in edges],
    )


def _repo_id(db: sqlite3.Connection, url: str, registry: str) -> int:
    db.execute("INSERT OR IGNORE INTO repos (url, registry) VALUES (?, ?)", (url, registry))
    row = db.execute("SELECT id FROM repos WHERE url = ?", (url,)).fetchone()
    return int(row["id"])


def refresh_repository(index: Index, registries: Registries, *, repo: Reference, registry: str) -> tuple[int, int, int]:
    """Bring one repository's rows up to date. Returns (artifacts added, removed, tags changed)."""
    backend = registries.backend(repo)
    tag_names = [t for t in backend.list_tags(repo.repository) if not (t.startswith("sha256-") and len(t) == 71)]
    db = index.connect()
    with index.writing() as wdb:
        repo_id = _repo_id(wdb, repo.repo_url, registry)
    known = {r["stored"] for r in db.execute("SELECT stored FROM artifacts WHERE repo_id = ?", (repo_id,))}
    old_tags = {r["tag"]: r["digest"] for r in db.execute("SELECT tag, digest FROM tags WHERE repo_id = ?", (repo_id,))}
    tags = {t.tag: t.parsed.digest for t in tagged_manifests(registries, repository=repo, tags=tag_names)}
    present = set(backend.list_manifests(repo.repository)) | set(tags.values())
    new: dict[str, tuple[ParsedManifest, ManifestData]] = {}
    for digest in sorted(present - known):
        item = _fetch(registries, repo, digest)
        if item is not None:
            new[digest] = item
    tags = {t: d for t, d in tags.items() if d in known or d in new}  # not those whose manifest vanished meanwhile
    gone = known - present
    changed = {t: d for t, d in tags.items() if old_tags.get(t) != d}
    dropped = old_tags.keys() - tags.keys()
    with index.writing() as wdb:
        for item in new.values():
            _insert(wdb, registries, repo_id, repo, item)
        for stored in gone:
            for row in wdb.execute("SELECT digest FROM artifacts WHERE repo_id = ? AND stored = ?", (repo_id, stored)):
                wdb.execute("DELETE FROM edges WHERE repo_id = ? AND child = ?", (repo_id, row["digest"]))
            wdb.execute("DELETE FROM artifacts WHERE repo_id = ? AND stored = ?", (repo_id, stored))
        wdb.executemany("DELETE FROM tags WHERE repo_id = ? AND tag = ?", [(repo_id, t) for t in dropped])
        wdb.executemany(
            "INSERT OR REPLACE INTO tags (repo_id, tag, digest, natural) VALUES (?, ?, ?, ?)",
            [(repo_id, t, d, natural_key(t)) for t, d in changed.items()],
        )
        wdb.execute("UPDATE repos SET refreshed = ? WHERE id = ?", (time.time(), repo_id))
    return len(new), len(gone), len(changed) + len(dropped)


def refresh(index: Index, registries: Registries, *, urls: list[str]) -> RefreshResult:
    """Refresh every repository under each registry URL; a registry that fails is reported, not fatal."""
    started = time.monotonic()
    added = removed = changed = count = 0
    errors: list[str] = []
    for url in urls:
        try:
            repos = list_registry(registries, url=url).repositories
        except TrainopsError as err:
            log.warning("cannot list %s: %s", url, err)
            errors.append(f"{url}: {err}")
            continue
        for repo_url in repos:
            try:
                a, r, c = refresh_repository(index, registries, repo=registries.ref(repo_url), registry=url)
            except TrainopsError as err:
                log.warning("cannot refresh %s: %s", repo_url, err)
                errors.append(f"{repo_url}: {err}")
                continue
            added, removed, changed, count = added + a, removed + r, changed + c, count + 1
    return RefreshResult(urls, count, added, removed, changed, time.monotonic() - started, errors)
