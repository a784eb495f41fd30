"""A cache of file digests keyed on (device, inode, path, size, mtime), as modctl and DVC keep.

Re-pushing an unchanged multi-GiB checkpoint then costs a stat per file instead of a full
read. Any change to the file's size, mtime (nanoseconds), inode or path misses the cache.
The cache is a small SQLite database in $XDG_CACHE_HOME/trainops (or TRAINOPS_CACHE_DIR);
if it cannot be opened, digests are simply computed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from pathlib import Path

from trainops import interrupt

HASH_CHUNK = 4 * 1024 * 1024


def cache_dir() -> Path:
    explicit = os.environ.get("TRAINOPS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainops"


def file_identity(path: Path) -> str:
    """What names a file's bytes while its digest is not known, on the cache's key: a file
    that changed since (size, mtime, inode, path) has another identity."""
    st = path.stat()
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{os.path.realpath(path)}"


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            interrupt.check()  # Ctrl-C: a transfer worker stops hashing too
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


class DigestCache:
    """Thread-safe; one SQLite connection per thread."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir() / "digests.sqlite"
        self._local = threading.local()
        self._dirs: dict[str, str] = {}  # directory → its real path (a tree's files share a few)
        self.hits = 0
        self.misses = 0

    def _key(self, path: Path) -> str:
        """The path a row is stored under: its directory's real path and its own name.

        Resolving each directory once (not each file) keeps a warm lookup of a large tree at
        a stat per file. A symlinked file is keyed by what it points at, so a file reached
        through different links (a Hugging Face cache snapshot, a staging directory of links
        made per run) shares one row: its device and inode are the target's anyway.
        """
        if os.path.islink(path):
            return os.path.realpath(path)
        parent, name = os.path.split(os.path.abspath(path))
        real = self._dirs.get(parent)
        if real is None:
            real = self._dirs[parent] = os.path.realpath(parent)
        return f"{real}/{name}"

    def _db(self) -> sqlite3.Connection | None:
        db = getattr(self._local, "db", None)
        if db is not None:
            return db  # type: ignore[no-any-return]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS digests (dev INTEGER, ino INTEGER, path TEXT, "
                "size INTEGER, mtime_ns INTEGER, digest TEXT, PRIMARY KEY (dev, ino, path))"
            )
        except sqlite3.Error:
            return None
        self._local.db = db
        return db

    def lookup(self, path: Path) -> tuple[str, int] | None:
        """The cached (digest, size) of an unchanged file, or None."""
        st = path.stat()
        db = self._db()
        if db is None:
            return None
        try:
            row = db.execute(
                "SELECT size, mtime_ns, digest FROM digests WHERE dev=? AND ino=? AND path=?",
                (st.st_dev, st.st_ino, self._key(path)),
            ).fetchone()
        except sqlite3.Error:
            return None
        if row and row[0] == st.st_size and row[1] == st.st_mtime_ns:
            self.hits += 1
            return str(row[2]), st.st_size
        return None

    def remember(self, path: Path, digest: str, before: os.stat_result) -> None:
        """Record a digest computed from the file as it was at `before` (if still unchanged)."""
        after = path.stat()
        db = self._db()
        if db is None or (after.st_size, after.st_mtime_ns, after.st_ino) != (
            before.st_size,
            before.st_mtime_ns,
            before.st_ino,
        ):
            return
        with contextlib.suppress(sqlite3.Error):
            db.execute(
                "INSERT OR REPLACE INTO digests VALUES (?, ?, ?, ?, ?, ?)",
                (before.st_dev, before.st_ino, self._key(path), before.st_size, before.st_mtime_ns, digest),
            )

    def digest(self, path: Path) -> tuple[str, int]:
        """(sha256 digest, size) of a file, from the cache when the file is unchanged."""
        cached = self.lookup(path)
        if cached is not None:
            return cached
        self.misses += 1
        before = path.stat()
        digest = hash_file(path)
        self.remember(path, digest, before)
        return digest, before.st_size
