"""The one interface every registry backend implements, and the helpers they share.

A backend stores, per repository, content-addressed blobs and manifests, and tags that
point at manifests. It knows nothing of artifacts, lineage or files: that is the Store's
job (trainops/registry/store.py). Every backend passes the same contract test suite
(tests/registry/test_backend_contract.py).

Repository arguments are full paths from the registry's top (the host, the bucket, or the
filesystem root for file://); the root's prefix only narrows list_repositories, which
returns full paths too.

Rules every backend keeps:
- A blob becomes visible only when complete and verified against its digest.
- `put_manifest` is called only after every blob the manifest names is present.
- Tags move atomically: a reader sees the old manifest or the new one, never a mix.
- Leases and the gc lock (trainops/registry/retention/lease.py) are small objects of their own beside
  a repository's content: never listed as blobs, manifests, tags or repositories.
- Errors are TrainopsErrors: NotFoundError for a missing blob/manifest/tag/repository,
  IntegrityError for content that does not match its digest, RemoteError for a service
  that failed after retries, ExistsError for a lost compare-and-swap.
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from trainops.errors import IntegrityError
from trainops.registry.reference import RegistryRoot

CHUNK = 1024 * 1024
Progress = Callable[[int], None]


def no_progress(_: int) -> None:
    return None


_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor."""

    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)
    artifact_type: str | None = None

    def as_oci(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out

    @classmethod
    def from_oci(cls, data: Any) -> Descriptor:
        """A descriptor read from a manifest, index or API answer; ValueError says what is wrong.

        Whoever can push to a registry can write any descriptor, so every field is checked
        before trainops acts on it: a digest it can verify, a size that is a count of bytes,
        annotations that are strings.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a descriptor must be an object, not {type(data).__name__}")
        media_type, digest, size = data.get("mediaType"), data.get("digest"), data.get("size")
        if not isinstance(media_type, str):
            raise ValueError("a descriptor's mediaType must be a string")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise ValueError(f"descriptor digest {str(digest)[:80]!r} is not sha256:<64 lowercase hex>")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"descriptor {digest[:19]} has size {str(size)[:40]!r}, not a count of bytes")
        annotations = data.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
        ):
            raise ValueError(f"descriptor {digest[:19]} has annotations that are not a map of strings")
        artifact_type = data.get("artifactType")
        if artifact_type is not None and not isinstance(artifact_type, str):
            raise ValueError(f"descriptor {digest[:19]} has an artifactType that is not a string")
        return cls(media_type, digest, size, dict(annotations), artifact_type)


@dataclass(frozen=True)
class BlobSource:
    """Where the bytes of a blob to upload come from: a local file, or an opener of a stream."""

    digest: str
    size: int
    path: Path | None = None
    opener: Callable[[], AbstractContextManager[BinaryIO]] | None = None

    def open(self) -> AbstractContextManager[BinaryIO]:
        if self.path is not None:
            return self.path.open("rb")
        assert self.opener is not None, "a BlobSource needs a path or an opener"
        return self.opener()


@dataclass(frozen=True)
class ManifestData:
    """A manifest as stored: its exact bytes, media type and digest."""

    data: bytes
    media_type: str
    digest: str


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hash_chunks(chunks: queue.Queue[bytes | memoryview | None], digest: Any) -> None:
    while (chunk := chunks.get()) is not None:
        digest.update(chunk)


class BackgroundHash:
    """sha256 computed on a helper thread, so hashing overlaps the I/O of the caller.

    hashlib releases the GIL on large buffers, as sockets and files do: on a multi-core
    machine a transfer then costs max(I/O, hashing) instead of their sum.
    """

    def __init__(self, depth: int = 16) -> None:
        self._hash = hashlib.sha256()
        # depth: buffers waiting to be hashed (each holds its bytes alive: memory is depth x size)
        self._chunks: queue.Queue[bytes | memoryview | None] = queue.Queue(maxsize=depth)
        # The thread must not hold self, or an abandoned hash would never be collected.
        self._thread = threading.Thread(target=_hash_chunks, args=(self._chunks, self._hash), daemon=True)
        self._thread.start()
        self._done = False
        # A writer abandoned on an error still stops its thread when it is collected.
        weakref.finalize(self, self._chunks.put, None)

    def update(self, chunk: bytes | memoryview) -> None:
        self._chunks.put(chunk)

    def hexdigest(self) -> str:
        if not self._done:
            self._chunks.put(None)
            self._thread.join()
            self._done = True
        return self._hash.hexdigest()


class DigestWriter:
    """Hash bytes as they are written to a file; check the digest and size at the end."""

    def __init__(self, fh: BinaryIO, expected_digest: str, expected_size: int | None) -> None:
        self.fh = fh
        self.hash = BackgroundHash()
        self.expected_digest = expected_digest
        self.expected_size = expected_size
        self.written = 0

    def write(self, chunk: bytes) -> None:
        self.hash.update(chunk)
        self.fh.write(chunk)
        self.written += len(chunk)

    def take_kept(self) -> None:
        """Hash what the file already holds (an interrupted download's start), leaving the
        position at its end, so that the next write continues it."""
        self.fh.seek(0)
        while chunk := self.fh.read(8 * 1024 * 1024):
            self.hash.update(chunk)
            self.written += len(chunk)

    def verify(self, what: str) -> None:
        actual = "sha256:" + self.hash.hexdigest()
        if self.expected_size is not None and self.written != self.expected_size:
            raise IntegrityError(
                f"{what}: received {self.written} bytes, expected {self.expected_size}",
                hint="the source is damaged or changed; nothing was kept",
            )
        if actual != self.expected_digest:
            raise IntegrityError(
                f"{what}: content has digest {actual}, expected {self.expected_digest}",
                hint="the stored blob is corrupt or was tampered with; nothing was kept",
            )


@dataclass(frozen=True)
class StaleUpload:
    """An unfinished blob upload: what the backend calls it, its bytes so far, its start."""

    name: str
    size: int
    started: float  # seconds since the epoch


@dataclass(frozen=True)
class Lease:
    """A marker beside a repository's content: a push in flight (a lease) or a gc run (the
    repository's gc lock). touched is its last write, by the store's clock where the store
    keeps it (S3 LastModified, a file's mtime): the heartbeat."""

    name: str
    touched: float  # seconds since the epoch
    owner: str = ""  # "pid@host …" and a token; listings of leases may leave it empty


class Backend(ABC):
    """Blobs, manifests and tags in repositories under one registry root."""

    scheme: str

    def __init__(self, root: RegistryRoot) -> None:
        self.root = root

    # -- blobs -------------------------------------------------------------------------
    @abstractmethod
    def blob_size(self, repo: str, digest: str) -> int | None:
        """Size of a present blob, or None when the repository does not have it."""

    @abstractmethod
    def upload_blob(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        """Store a blob; verify it against source.digest before it becomes visible.

        An interrupted upload is resumed where the backend can (OCI upload sessions,
        S3 multipart uploads); on success the blob is complete, on error nothing is visible.
        """

    @abstractmethod
    def download_blob(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        """Write a blob to dest (a temporary file of the caller's), verifying its digest.

        Raises IntegrityError when the content does not match; dest is then removed.
        """

    @abstractmethod
    def open_blob(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        """A readable stream of a blob (not verified: callers that copy verify on write)."""

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of a blob from `offset` without reading the rest of it: fewer
        only where the blob ends, b"" past its end. file:// seeks, oci:// sends an HTTP Range
        request, s3:// a ranged GET. The bytes are not verified (a part cannot be checked
        against the blob's digest): callers validate what they read. NotFoundError if absent.

        This default reads the blob's stream up to offset + length; backends override it.
        """
        check_range(offset, length)
        if length == 0:
            return b""
        with self.open_blob(repo, digest) as fh:
            return read_span(fh, offset, length)

    def honours_ranges(self) -> bool:
        """False once the server has answered a ranged read with the whole blob (an HTTP
        registry that ignores Range): callers that read many small ranges then read whole
        blobs instead. file:// and s3:// always honour ranges."""
        return True

    def ingest_file(self, repo: str, path: Path, progress: Progress = no_progress) -> tuple[str, int, bool] | None:
        """Store a local file whose digest is not known yet, hashing it in the same pass.

        Returns (digest, size, whether the blob was new), or None when the backend cannot (it needs the digest first:
        the caller then hashes the file and calls upload_blob). Saves a full read of every
        file on a cold digest cache for backends that can.
        """
        return None

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Make a blob of another repository of this registry present without copying it.

        Returns False when the backend cannot (the caller then uploads it).
        """
        return False

    @abstractmethod
    def delete_blob(self, repo: str, digest: str) -> None:
        """Remove a blob (gc only). A missing blob is not an error."""

    @abstractmethod
    def list_blobs(self, repo: str) -> list[str] | None:
        """Digests of every blob in the repository, or None if the backend cannot list them."""

    def stale_uploads(self, repo: str, *, started_before: float) -> list[StaleUpload]:
        """Unfinished uploads of blobs (an interrupted push) begun before started_before
        (seconds since the epoch). Backends whose server owns uploads report none."""
        return []

    def remove_stale_upload(self, repo: str, upload: StaleUpload) -> None:
        """Drop one unfinished upload (gc only). One already gone is not an error."""
        raise NotImplementedError(f"{type(self).__name__} reports no unfinished uploads to remove")

    # -- leases and the gc lock (trainops/registry/retention/lease.py has the protocol) ---------
    # The defaults are no-ops for backends whose server owns garbage collection (oci://):
    # no lease is kept, and gc always gets the lock (it deletes no blob there).
    def put_lease(self, repo: str, name: str, owner: str) -> None:  # noqa: B027 - no-op default
        """Write lease `name` of repo (a push is writing to it), or touch it: a heartbeat."""

    def drop_lease(self, repo: str, name: str) -> None:  # noqa: B027 - no-op default
        """Remove a lease; one already gone is not an error."""

    def list_leases(self, repo: str) -> list[Lease]:
        """The leases of repo (a repository with none, or none yet, has an empty list)."""
        return []

    def take_gc_lock(self, repo: str, owner: str, *, stale_before: float) -> bool:
        """Create repo's gc lock for owner, exclusively; or take over one last touched
        before stale_before (its gc died). False when a live gc holds it. Of two callers
        at once, at most one gets True."""
        return True

    def refresh_gc_lock(self, repo: str, owner: str) -> bool:
        """Touch the gc lock if owner still holds it (the heartbeat); False if it was lost."""
        return True

    def release_gc_lock(self, repo: str, owner: str) -> None:  # noqa: B027 - no-op default
        """Remove the gc lock if owner holds it (a lock another gc took over stays)."""

    def gc_lock(self, repo: str) -> Lease | None:
        """The repository's gc lock, or None when no gc holds one."""
        return None

    # -- manifests and tags ------------------------------------------------------------
    @abstractmethod
    def put_manifest(self, repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        """Store a manifest (its blobs are already present) and, if given, point tag at it.

        If the manifest has a `subject`, record it so that referrers() of the subject lists
        this manifest (OCI: the referrers API, or the referrers tag schema `sha256-<hex>` on
        registries without it, such as Distribution 2.8).
        """

    @abstractmethod
    def get_manifest(self, repo: str, reference: str) -> ManifestData:
        """The manifest a tag or digest names. NotFoundError if there is none."""

    @abstractmethod
    def list_tags(self, repo: str) -> list[str]:
        """Tags of a repository, sorted. NotFoundError if the repository does not exist."""

    def tag_targets(self, repo: str) -> dict[str, str] | None:
        """Every tag of the repository and the digest of the manifest it names, when the
        tag listing itself carries them (the file:// index: one read); None when each tag
        would cost a request of its own (callers then read the manifests by tag).
        NotFoundError if the repository does not exist.
        """
        return None

    @abstractmethod
    def delete_tag(self, repo: str, tag: str) -> None:
        """Remove a tag (the manifest stays). NotFoundError if absent."""

    @abstractmethod
    def delete_manifest(self, repo: str, digest: str) -> None:
        """Remove a manifest and every tag pointing at it. NotFoundError if absent."""

    @abstractmethod
    def list_manifests(self, repo: str) -> list[str]:
        """Digests of every manifest the repository holds (tagged or not) that can be listed."""

    @abstractmethod
    def list_repositories(self) -> list[str]:
        """Full paths of the repositories under the root's prefix, sorted."""

    # -- referrers (OCI 1.1 subject) ---------------------------------------------------
    @abstractmethod
    def referrers(self, repo: str, digest: str) -> list[Descriptor]:
        """Manifests whose subject is digest (with their artifactType and annotations)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def iter_file(fh: BinaryIO, chunk: int = CHUNK) -> Iterator[bytes]:
    while True:
        data = fh.read(chunk)
        if not data:
            return
        yield data


def check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"a blob range needs offset >= 0 and length >= 0, not {offset}, {length}")


def read_exact(fh: Any, length: int) -> bytes:
    """length bytes from a stream, or fewer where it ends (streams may return short reads)."""
    parts: list[bytes] = []
    left = length
    while left > 0:
        data = fh.read(min(left, CHUNK))
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)


def read_span(fh: Any, offset: int, length: int) -> bytes:
    """Bytes [offset, offset + length) of a stream read from its start; memory stays at one
    chunk while the prefix is skipped."""
    left = offset
    while left > 0:
        skipped = fh.read(min(left, CHUNK))
        if not skipped:
            return b""
        left -= len(skipped)
    return read_exact(fh, length)
