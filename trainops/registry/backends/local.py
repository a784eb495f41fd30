"""file:// backend: every repository is an OCI image layout directory (skopeo and umoci read it).

    <repo>/oci-layout                 {"imageLayoutVersion": "1.0.0"}
    <repo>/index.json                 tagged manifests carry org.opencontainers.image.ref.name
    <repo>/blobs/sha256/<hex>         blobs and manifests
    <repo>/.trainops/                 lock file and in-progress uploads (ignored by OCI tools)
    <repo>/.trainops/leases/<name>    a push in flight (trainops/registry/retention/lease.py)
    <repo>/.trainops/gc-lock          a gc run deleting in this repository

Blobs are written to .trainops/tmp, verified, then renamed into blobs/ (atomic on one
filesystem); index.json is replaced atomically under an exclusive lock, so concurrent
writers in other processes never lose a tag or see a torn index.

A partial file is named after what it will hold (the blob's digest, or for a file copied
while it is hashed, the file's identity: device, inode, path, size, mtime), so a push that
was interrupted (Ctrl-C, a kill) and runs again continues it: the bytes it holds are
compared with the source (a read, no write), the rest is copied, and the whole is hashed
and verified as a fresh copy is. A partial another process is writing (its lock) is left
alone: that push copies into a file of its own, and so is one another process renamed
into blobs/ between this one's open and its lock (the file is checked to be still there).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO

from trainops import interrupt
from trainops.errors import InputError, IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.backends.base import (
    Backend,
    BlobSource,
    Descriptor,
    DigestWriter,
    Lease,
    ManifestData,
    Progress,
    StaleUpload,
    check_range,
    iter_file,
    no_progress,
    read_exact,
    sha256_digest,
)
from trainops.registry.reference import DIGEST_RE, RegistryRoot

COPY_CHUNK = 8 * 1024 * 1024
_LEASE_NAME = re.compile(r"^[0-9a-f]{32}\Z")


def _hex(digest: str) -> str:
    if not DIGEST_RE.match(digest):
        raise IntegrityError(f"{digest!r} is not a sha256 digest")
    return digest.split(":", 1)[1]


class LocalBackend(Backend):
    scheme = "file"

    def __init__(self, root: RegistryRoot) -> None:
        super().__init__(root)
        self._types: dict[str, str] = {}  # manifest digest -> media type, as index.json named it

    # -- layout helpers ------------------------------------------------------------------
    @staticmethod
    def _dir(repo: str) -> Path:
        return Path(repo)

    def _blob(self, repo: str, digest: str) -> Path:
        return self._dir(repo) / "blobs" / "sha256" / _hex(digest)

    def _require(self, repo: str) -> Path:
        path = self._dir(repo)
        if not (path / "oci-layout").is_file():
            raise NotFoundError(
                f"no repository at {path} (no OCI image layout there)",
                hint="check the reference, or push to it first",
            )
        return path

    def _ensure(self, repo: str) -> Path:
        path = self._dir(repo)
        if (path / "oci-layout").is_file():
            return path
        (path / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (path / ".trainops" / "tmp").mkdir(parents=True, exist_ok=True)
        with self._locked(path):
            if not (path / "index.json").exists():
                self._write_index(path, [])
            if not (path / "oci-layout").exists():
                _atomic_write(
                    path / "oci-layout", json.dumps({"imageLayoutVersion": media.OCI_LAYOUT_VERSION}).encode()
                )
        return path

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        lock_dir = path / ".trainops"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with (lock_dir / "lock").open("a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _tmp(self, repo: str) -> Path:
        tmp = self._ensure(repo) / ".trainops" / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp / f"{uuid.uuid4().hex}.part"

    @contextlib.contextmanager
    def _partial(self, repo: str, blob: str) -> Iterator[tuple[BinaryIO, Path, bool]]:
        """The repository's partial file of blob (a digest or a file's identity), open for
        update and locked, and whether it can be kept for a re-run; a fresh temporary file
        (not kept) when another process holds that one."""
        tmp = self._ensure(repo) / ".trainops" / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        path = tmp / f"{hashlib.sha256(blob.encode()).hexdigest()[:40]}.part"
        fh = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+b")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = _still_at(fh, path)
        except BlockingIOError:
            held = False
        if not held:  # another writer has it, or renamed it into blobs/ between our open and our lock
            fh.close()
            path = self._tmp(repo)
            fh = path.open("w+b")
            try:
                yield fh, path, False
            finally:
                fh.close()
                path.unlink(missing_ok=True)
            return
        try:
            yield fh, path, True
        finally:
            fh.close()

    @staticmethod
    def _read_index(path: Path) -> list[dict[str, Any]]:
        try:
            data = json.loads((path / "index.json").read_bytes())
        except FileNotFoundError:
            return []
        return list(data.get("manifests") or [])

    @staticmethod
    def _write_index(path: Path, entries: list[dict[str, Any]]) -> None:
        body = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": entries}
        _atomic_write(path / "index.json", json.dumps(body, indent=2).encode() + b"\n")

    # -- blobs -----------------------------------------------------------------------------
    def blob_size(self, repo: str, digest: str) -> int | None:
        try:
            return self._blob(repo, digest).stat().st_size
        except FileNotFoundError:
            return None

    def upload_blob(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        final = self._blob(repo, source.digest)
        if final.exists() and final.stat().st_size == source.size:
            progress(source.size)
            return
        with self._partial(repo, source.digest) as (out, part, _):
            if self.blob_size(repo, source.digest) == source.size:  # another writer stored it meanwhile
                part.unlink(missing_ok=True)
                progress(source.size)
                return
            writer = DigestWriter(out, source.digest, source.size)
            with source.open() as src:
                _continue(src, writer, progress)
            try:
                writer.verify(f"blob {source.digest[:19]} for {repo}")
            except IntegrityError:
                part.unlink(missing_ok=True)
                raise
            os.chmod(part, 0o444)
            os.replace(part, final)

    def ingest_file(self, repo: str, path: Path, progress: Progress = no_progress) -> tuple[str, int, bool] | None:
        """Copy and hash in one pass (hashing on a second thread), then rename into place;
        a partial copy an interrupted push left of this very file is continued."""
        from trainops.registry.digestcache import file_identity  # lazy: loads sqlite3

        with self._partial(repo, file_identity(path)) as (out, part, _):
            writer = DigestWriter(out, "", None)
            with path.open("rb") as src:
                _continue(src, writer, progress)
            digest, size = "sha256:" + writer.hash.hexdigest(), writer.written
            final = self._blob(repo, digest)
            if final.exists():
                part.unlink(missing_ok=True)
                return digest, size, False
            os.chmod(part, 0o444)
            os.replace(part, final)
            return digest, size, True

    def download_blob(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        path = self._blob(repo, digest)
        try:
            src = path.open("rb")
        except FileNotFoundError:
            raise NotFoundError(f"blob {digest} is not in {repo}") from None
        try:
            out = os.fdopen(os.open(dest, os.O_RDWR | os.O_CREAT, 0o644), "r+b")
            with src, out:  # an interrupted copy's start is continued
                writer = DigestWriter(out, digest, None)
                _continue(src, writer, progress)
            writer.verify(f"blob {digest[:19]} in {repo}")
        except IntegrityError:
            dest.unlink(missing_ok=True)
            raise
        except BaseException:  # Ctrl-C: what was copied stays for the next run
            if dest.is_file() and not dest.stat().st_size:
                dest.unlink()
            raise

    def open_blob(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        try:
            return self._blob(repo, digest).open("rb")
        except FileNotFoundError:
            raise NotFoundError(f"blob {digest} is not in {repo}") from None

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        """A seek and a read of the blob file."""

        check_range(offset, length)
        try:
            with self._blob(repo, digest).open("rb") as fh:
                fh.seek(offset)
                return read_exact(fh, length)
        except FileNotFoundError:
            raise NotFoundError(f"blob {digest} is not in {repo}") from None

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        source = self._blob(from_repo, digest)
        if not source.is_file():
            return False
        target = self._blob(repo, digest)
        self._ensure(repo)
        tmp = self._tmp(repo)
        try:
            os.link(source, tmp)  # same filesystem: share the bytes (blobs are read-only)
        except OSError:
            return False
        os.replace(tmp, target)
        return True

    def delete_blob(self, repo: str, digest: str) -> None:
        self._blob(repo, digest).unlink(missing_ok=True)

    def list_blobs(self, repo: str) -> list[str] | None:
        root = self._require(repo) / "blobs" / "sha256"
        return sorted(f"sha256:{p.name}" for p in root.iterdir() if p.is_file())

    def stale_uploads(self, repo: str, *, started_before: float) -> list[StaleUpload]:
        """`.trainops/tmp/*.part` files last written before started_before: a push killed
        mid-file leaves one (a live push keeps writing its own, so it stays newer)."""
        tmp = self._require(repo) / ".trainops" / "tmp"
        found: list[StaleUpload] = []
        for part in sorted(tmp.glob("*.part")) if tmp.is_dir() else []:
            try:
                stat = part.stat()
            except FileNotFoundError:
                continue
            if stat.st_mtime < started_before:
                found.append(StaleUpload(part.name, stat.st_size, stat.st_mtime))
        return found

    def remove_stale_upload(self, repo: str, upload: StaleUpload) -> None:
        if "/" in upload.name or not upload.name.endswith(".part"):
            raise InputError(f"not an upload of {repo}: {upload.name!r}")
        (self._require(repo) / ".trainops" / "tmp" / upload.name).unlink(missing_ok=True)

    # -- leases and the gc lock ------------------------------------------------------
    def _lease(self, repo: str, name: str) -> Path:
        if not _LEASE_NAME.match(name):
            raise InputError(f"{name!r} is not a lease name", hint="lease names are 32 lowercase hex digits")
        return self._dir(repo) / ".trainops" / "leases" / name

    def put_lease(self, repo: str, name: str, owner: str) -> None:
        """Written whole (a rename), so the mtime is the heartbeat."""
        path = self._lease(repo, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, owner.encode())

    def drop_lease(self, repo: str, name: str) -> None:
        self._lease(repo, name).unlink(missing_ok=True)

    def list_leases(self, repo: str) -> list[Lease]:
        found: list[Lease] = []
        folder = self._dir(repo) / ".trainops" / "leases"
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not _LEASE_NAME.match(path.name):
                continue  # a write in progress (.name.<uuid>)
            with contextlib.suppress(FileNotFoundError):
                found.append(Lease(path.name, path.stat().st_mtime, path.read_text(errors="replace")))
        return found

    def _gc_lock_file(self, repo: str) -> Path:
        return self._dir(repo) / ".trainops" / "gc-lock"

    def take_gc_lock(self, repo: str, owner: str, *, stale_before: float) -> bool:
        """O_CREAT|O_EXCL, under the repository's flock so that taking over a dead gc's
        lock (a replace) cannot race another gc doing the same."""
        path = self._require(repo)
        lock = self._gc_lock_file(repo)
        with self._locked(path):
            held = self.gc_lock(repo)
            if held is not None and held.touched >= stale_before:
                return False
            lock.unlink(missing_ok=True)
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(owner.encode())
        return True

    def refresh_gc_lock(self, repo: str, owner: str) -> bool:
        with self._locked(self._dir(repo)):
            held = self.gc_lock(repo)
            if held is None or held.owner != owner:
                return False
            os.utime(self._gc_lock_file(repo))
        return True

    def release_gc_lock(self, repo: str, owner: str) -> None:
        with self._locked(self._dir(repo)):
            held = self.gc_lock(repo)
            if held is not None and held.owner == owner:
                self._gc_lock_file(repo).unlink(missing_ok=True)

    def gc_lock(self, repo: str) -> Lease | None:
        lock = self._gc_lock_file(repo)
        try:
            touched = lock.stat().st_mtime
            return Lease(lock.name, touched, lock.read_text(errors="replace"))
        except FileNotFoundError:
            return None

    # -- manifests and tags ------------------------------------------------------------
    def put_manifest(self, repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        if sha256_digest(manifest.data) != manifest.digest:
            raise IntegrityError(f"manifest bytes do not match {manifest.digest}")
        path = self._ensure(repo)
        final = self._blob(repo, manifest.digest)
        if not final.exists():
            tmp = self._tmp(repo)
            tmp.write_bytes(manifest.data)
            os.chmod(tmp, 0o444)
            os.replace(tmp, final)
        parsed = json.loads(manifest.data)
        entry: dict[str, Any] = {
            "mediaType": manifest.media_type,
            "digest": manifest.digest,
            "size": len(manifest.data),
        }
        if parsed.get("artifactType"):
            entry["artifactType"] = parsed["artifactType"]
        with self._locked(path):
            entries = self._read_index(path)
            if tag is not None:
                entries = self._untag(entries, tag)
            same = [e for e in entries if e["digest"] == manifest.digest]
            if tag is None and same:
                return
            entries = [e for e in entries if not (e["digest"] == manifest.digest and _tag_of(e) is None)]
            if tag is not None:
                entry["annotations"] = {media.A_REF_NAME: tag}
            entries.append(entry)
            self._write_index(path, entries)

    @staticmethod
    def _untag(entries: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
        """Entries with tag removed; a manifest that loses its last tag stays, untagged."""
        kept = [e for e in entries if _tag_of(e) != tag]
        for old in (e for e in entries if _tag_of(e) == tag):
            if not any(e["digest"] == old["digest"] for e in kept):
                bare = {k: v for k, v in old.items() if k != "annotations"}
                kept.append(bare)
        return kept

    def get_manifest(self, repo: str, reference: str) -> ManifestData:
        """By digest only the blob is read, not index.json: reading every manifest of a
        repository then costs one small file each, not the whole index each."""
        if DIGEST_RE.match(reference):
            return self._manifest(repo, reference, self._types.get(reference))
        path = self._require(repo)
        known = next((e for e in self._read_index(path) if _tag_of(e) == reference), None)
        if known is None:
            raise NotFoundError(f"no tag {reference!r} in {repo}", hint="`trainops registry ls` lists the tags")
        return self._manifest(repo, "sha256:" + _hex(str(known["digest"])), str(known["mediaType"]))

    def _manifest(self, repo: str, digest: str, media_type: str | None) -> ManifestData:
        """digest is already known well-formed (matched, or read from the index)."""
        try:
            with open(os.path.join(repo, "blobs", "sha256", digest[7:]), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            self._require(repo)
            raise NotFoundError(f"no manifest {digest} in {repo}") from None
        if sha256_digest(data) != digest:
            raise IntegrityError(f"manifest {digest} in {repo} is corrupt (its bytes hash differently)")
        if media_type is None:
            media_type = _media_type(data) or self._indexed_type(self._dir(repo), digest)
        return ManifestData(data=data, media_type=media_type, digest=digest)

    def _indexed_type(self, path: Path, digest: str) -> str:
        """The media type index.json records for a manifest whose bytes do not name one."""
        entry = next((e for e in self._read_index(path) if e["digest"] == digest), None)
        return str(entry["mediaType"]) if entry else media.OCI_MANIFEST

    def list_tags(self, repo: str) -> list[str]:
        return sorted(self.tag_targets(repo))

    def tag_targets(self, repo: str) -> dict[str, str]:
        """From one read of index.json; the media types it names are kept, so that reading
        those manifests by digest next need not parse them twice."""
        entries = self._read_index(self._require(repo))
        self._types.update((str(e["digest"]), str(e["mediaType"])) for e in entries)
        return {t: str(e["digest"]) for e in entries if (t := _tag_of(e)) is not None}

    def delete_tag(self, repo: str, tag: str) -> None:
        path = self._require(repo)
        with self._locked(path):
            entries = self._read_index(path)
            if not any(_tag_of(e) == tag for e in entries):
                raise NotFoundError(f"no tag {tag!r} in {repo}")
            self._write_index(path, self._untag(entries, tag))

    def delete_manifest(self, repo: str, digest: str) -> None:
        path = self._require(repo)
        with self._locked(path):
            entries = self._read_index(path)
            if not any(e["digest"] == digest for e in entries):
                raise NotFoundError(f"no manifest {digest} in {repo}")
            self._write_index(path, [e for e in entries if e["digest"] != digest])
        self._blob(repo, digest).unlink(missing_ok=True)

    def list_manifests(self, repo: str) -> list[str]:
        path = self._require(repo)
        return sorted({e["digest"] for e in self._read_index(path)})

    def list_repositories(self) -> list[str]:
        top = Path(self.root.prefix)
        if not top.is_dir():
            return []
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(top):
            if "oci-layout" in filenames:
                found.append(os.path.normpath(dirpath))
                dirnames[:] = []  # a layout's blobs/ holds no repositories
            else:
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        return sorted(found)

    def referrers(self, repo: str, digest: str) -> list[Descriptor]:
        path = self._require(repo)
        found: list[Descriptor] = []
        for entry in self._read_index(path):
            try:
                parsed = json.loads(self._blob(repo, entry["digest"]).read_bytes())
            except (FileNotFoundError, ValueError):
                continue
            subject = parsed.get("subject") or {}
            if subject.get("digest") == digest:
                found.append(
                    Descriptor(
                        media_type=entry["mediaType"],
                        digest=entry["digest"],
                        size=int(entry["size"]),
                        annotations=dict(parsed.get("annotations") or {}),
                        artifact_type=parsed.get("artifactType") or (parsed.get("config") or {}).get("mediaType"),
                    )
                )
        unique = {d.digest: d for d in found}
        return [unique[k] for k in sorted(unique)]


def _continue(src: BinaryIO, writer: DigestWriter, progress: Progress) -> None:
    """Copy src into writer's file (a partial copy, or empty) while a helper thread hashes
    every byte of src: the bytes the file holds that match src are kept unwritten (read
    and compared), from the first difference on src is written. Stops between chunks on
    Ctrl-C (interrupt.Cancelled), leaving what was written for the next run."""
    out = writer.fh
    held = os.fstat(out.fileno()).st_size
    out.seek(0)
    while writer.written < held:
        interrupt.check()
        data = src.read(min(COPY_CHUNK, held - writer.written))
        if not data:
            break
        if out.read(len(data)) != data:  # not the same bytes: write from here on
            out.seek(writer.written)
            out.truncate()
            writer.write(data)
            progress(len(data))
            break
        writer.hash.update(data)
        writer.written += len(data)
        progress(len(data))
    out.seek(writer.written)
    out.truncate()
    for chunk in iter_file(src, COPY_CHUNK):
        interrupt.check()
        writer.write(chunk)
        progress(len(chunk))
    out.flush()
    os.fsync(out.fileno())


def _media_type(data: bytes) -> str | None:
    try:
        found = json.loads(data).get("mediaType")
    except (ValueError, AttributeError):
        return None
    return str(found) if found else None


def _tag_of(entry: dict[str, Any]) -> str | None:
    tag = (entry.get("annotations") or {}).get(media.A_REF_NAME)
    return str(tag) if tag is not None else None


def _still_at(fh: BinaryIO, path: Path) -> bool:
    """Whether the open file fh is still the file at path (not renamed away meanwhile)."""
    try:
        here = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fh.fileno())
    return (mine.st_dev, mine.st_ino) == (here.st_dev, here.st_ino)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
