"""s3:// backend: the blobs, manifests and tags of each repository as objects in one bucket.

The layout mirrors the OCI image layout, so that a synced copy is recognisable
(registry/SPEC-s3.md is the reference):

    <repo>/repository.json                       marker: this prefix is a repository
    <repo>/blobs/sha256/<hex>                    blobs (complete and verified, or absent)
    <repo>/manifests/sha256/<hex>                manifest bytes; Content-Type = media type
    <repo>/tags/<tag>                            descriptor JSON of the tagged manifest
    <repo>/referrers/<subject-hex>/<hex>         descriptor JSON of a manifest with a subject
    <repo>/_trainops/leases/<name>               a push in flight (trainops/registry/retention/lease.py)
    <repo>/_trainops/gc-lock                     a gc run deleting in this repository
    <repo>/_tags/…                               the tag index (tags: a cache of tags/)

`<repo>` is the repository's full path in the bucket (it starts with the root's prefix).
Tags move with conditional writes (If-None-Match: * to create, If-Match: <ETag> to
replace), re-read and retried when another writer got there first: the last writer wins,
and a tag always holds one complete descriptor of a manifest already stored. Blob
transfers are in transfer (verified multipart uploads that resume) and download.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any, BinaryIO, cast

from trainops.errors import ExistsError, InputError, IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.backends.base import (
    Backend,
    BlobSource,
    Descriptor,
    DigestWriter,
    ManifestData,
    Progress,
    StaleUpload,
    no_progress,
    sha256_digest,
)
from trainops.registry.backends.s3.client import (
    ConditionFailed,
    KeyMissing,
    S3Ops,
    Unsupported,
    make_client,
    sha256_b64,
)
from trainops.registry.backends.s3.download import Downloads
from trainops.registry.backends.s3.lease import S3Leases
from trainops.registry.backends.s3.tags import TagIndex
from trainops.registry.backends.s3.transfer import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PART_SIZE,
    MIN_PART_SIZE,
    Transfers,
    TransferSettings,
)
from trainops.registry.reference import DIGEST_RE, TAG_RE, RegistryRoot
from trainops.retry import Backoff, RetryPolicy

__all__ = ["DEFAULT_PAGE_SIZE", "DEFAULT_PART_SIZE", "MIN_PART_SIZE", "S3Backend"]

MARKER = "repository.json"
MARKER_MEDIA_TYPE = "application/vnd.trainops.s3.repository.v1+json"
DESCRIPTOR_MEDIA_TYPE = "application/vnd.oci.descriptor.v1+json"
RESERVED = frozenset({"blobs", "manifests", "tags", "referrers", "_tags", "_trainops"})
DEFAULT_PAGE_SIZE = 1000  # ListObjectsV2's maximum
TAG_ATTEMPTS = 100
PENDING_WRITE = "tag-write"  # the "upload id" of an unfinished tag write's marker, for gc
_GENERIC_TYPES = (None, "", "binary/octet-stream", "application/octet-stream")


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _hex(digest: str) -> str:
    if not DIGEST_RE.match(digest):
        raise InputError(f"{digest!r} is not a sha256 digest", hint="write sha256:<64 hex digits>")
    return digest[7:]


def _check_tag(tag: str) -> str:
    if not TAG_RE.match(tag):
        raise InputError(f"{tag!r} is not a valid tag", hint="tags match [A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
    return tag


def _contention(what: str) -> Backoff:
    """Writers that lost a conditional write: short, fully jittered waits spread them apart."""
    return Backoff(what, policy=RetryPolicy(attempts=TAG_ATTEMPTS, base=0.005, cap=0.5, jitter=1.0))


class S3Backend(S3Leases, Backend):
    """Repositories as key prefixes of one bucket (root.location), listed under root.prefix."""

    scheme = "s3"

    def __init__(
        self,
        root: RegistryRoot,
        *,
        part_size: int = DEFAULT_PART_SIZE,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        download_concurrency: int = 1,
        page_size: int = DEFAULT_PAGE_SIZE,
        max_attempts: int | None = None,
    ) -> None:
        super().__init__(root)
        self.bucket = root.location
        self.page_size = page_size
        self.client: Any = make_client(
            max_pool_connections=2 * max(max_concurrency, download_concurrency) + 16,
            max_attempts=max_attempts,
        )
        self.ops = S3Ops(self.client, self.bucket)
        settings = TransferSettings(
            part_size=part_size,
            max_concurrency=max_concurrency,
            download_concurrency=download_concurrency,
        )
        self.transfers = Transfers(self.ops, settings)
        self.downloads = Downloads(self.ops, settings, self.transfers.pool)
        self.index = TagIndex(
            self.ops,
            pool=self.transfers.pool,
            truth=self._truth,
            names=self._index_names,
        )
        self._fresh: set[str] = set()
        self._repos: set[str] = set()
        self._lock = threading.Lock()

    # -- layout ----------------------------------------------------------------------------
    @staticmethod
    def _key(repo: str, *rest: str) -> str:
        repo = repo.strip("/")
        if not repo:
            raise InputError("an S3 repository needs a name", hint="write s3://BUCKET/REPO")
        return "/".join((repo, *rest))

    def blob_key(self, repo: str, digest: str) -> str:
        return self._key(repo, "blobs", "sha256", _hex(digest))

    def manifest_key(self, repo: str, digest: str) -> str:
        return self._key(repo, "manifests", "sha256", _hex(digest))

    def tag_key(self, repo: str, tag: str) -> str:
        return self._key(repo, "tags", _check_tag(tag))

    def referrer_key(self, repo: str, subject: str, digest: str) -> str:
        return self._key(repo, "referrers", _hex(subject), _hex(digest))

    def _url(self, repo: str) -> str:
        return f"s3://{self.bucket}/{repo.strip('/')}"

    def _ensure_repo(self, repo: str) -> None:
        """Write the repository marker once (If-None-Match: an existing one is kept)."""
        with self._lock:
            if repo in self._repos:
                return
        marker = _json(
            {
                "mediaType": MARKER_MEDIA_TYPE,
                "layoutVersion": 1,
                "imageLayoutVersion": media.OCI_LAYOUT_VERSION,
            }
        )
        try:
            self._put_small(self._key(repo, MARKER), marker, "application/json", IfNoneMatch="*")
            created = True
        except ConditionFailed:
            created = False
        with self._lock:
            self._repos.add(repo)
            if created:  # no tag can predate the marker: its tag index needs no listing
                self._fresh.add(self._key(repo))

    def _index_names(self, repo: str) -> list[str]:
        """The tags to build repo's index from: none for a repository this process has just
        created (once: a later rebuild, after someone removed the index, lists them)."""
        with self._lock:
            if repo in self._fresh:
                self._fresh.discard(repo)
                return []
        return self._names(self._key(repo, "tags", ""))

    def _put_small(self, key: str, body: bytes, content_type: str, **condition: str) -> None:
        """PutObject of a small JSON object, conditional when asked (ConditionFailed if lost)."""
        try:
            self.ops.call("put_object", key, Body=body, ContentType=content_type, **condition)
        except Unsupported:
            if not condition:
                raise
            # An S3-compatible server without conditional writes: a plain PUT is still atomic
            # (readers see the old or the new object), but the last writer wins unchecked.
            self.ops.call("put_object", key, Body=body, ContentType=content_type)

    def _require_repo(self, repo: str) -> None:
        """NotFoundError naming what is missing: the repository, or the bucket itself."""
        try:
            self.ops.call("head_object", self._key(repo, MARKER))
            return
        except KeyMissing:
            pass
        try:
            self.ops.call("head_bucket")
        except KeyMissing:
            raise NotFoundError(
                f"S3 bucket {self.bucket!r} does not exist at {self.ops.endpoint}",
                hint=f"create it (aws s3 mb s3://{self.bucket}) or correct the registry URL",
            ) from None
        raise NotFoundError(f"no repository {self._url(repo)}", hint="check the reference, or push to it first")

    def _names(self, prefix: str) -> list[str]:
        return sorted(key[len(prefix) :] for key in self.ops.keys(prefix, page_size=self.page_size))

    # -- blobs -----------------------------------------------------------------------------
    def blob_size(self, repo: str, digest: str) -> int | None:
        return self.transfers.present(self.blob_key(repo, digest))

    def upload_blob(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        key = self.blob_key(repo, source.digest)
        self._ensure_repo(repo)
        if self.transfers.present(key) == source.size:
            progress(source.size)
            return
        self.transfers.upload(key, source, progress, f"blob {source.digest[:19]} for {repo}")

    def download_blob(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        """Written in order: an interrupted download keeps the blob's start in dest, which the
        next one continues (Downloads.continue_file); verified whole as before."""
        key = self.blob_key(repo, digest)
        where = f"blob {digest[:19]} in {self._url(repo)}"
        try:
            kept = dest.is_file() and dest.stat().st_size > 0
            if kept and self.downloads.continue_file(key, dest, digest, progress, where):
                return
            with dest.open("wb") as out:
                writer = DigestWriter(out, digest, None)
                self.downloads.download(key, writer, progress)
            writer.verify(where)
        except KeyMissing:
            dest.unlink(missing_ok=True)
            raise NotFoundError(f"blob {digest} is not in {self._url(repo)}") from None
        except IntegrityError:
            dest.unlink(missing_ok=True)
            raise
        except BaseException:  # Ctrl-C, a service that kept failing: the start stays for the next run
            if dest.is_file() and not dest.stat().st_size:
                dest.unlink()
            raise

    def open_blob(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        try:
            resp = self.ops.call("get_object", self.blob_key(repo, digest))
        except KeyMissing:
            raise NotFoundError(f"blob {digest} is not in {self._url(repo)}") from None
        return cast(AbstractContextManager[BinaryIO], resp["Body"])  # botocore StreamingBody

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        """A ranged GetObject (Range: bytes=offset-end); past the end (InvalidRange) is b""."""
        try:
            return self.downloads.read_range(self.blob_key(repo, digest), offset, length, self._url(repo))
        except KeyMissing:
            raise NotFoundError(f"blob {digest} is not in {self._url(repo)}") from None

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """A server-side copy inside the bucket: no byte passes through this machine."""
        src, dst = self.blob_key(from_repo, digest), self.blob_key(repo, digest)
        size = self.transfers.present(src)
        if size is None:
            return False
        self._ensure_repo(repo)
        if self.transfers.present(dst) != size:
            self.transfers.copy(src, dst, size)
        return True

    def delete_blob(self, repo: str, digest: str) -> None:
        self.ops.call("delete_object", self.blob_key(repo, digest))

    def stale_uploads(self, repo: str, *, started_before: float) -> list[StaleUpload]:
        """Unfinished multipart uploads of this repository's blobs with no activity since
        started_before: begun before it, and no part sent after it (S3 keeps, and bills,
        their parts until they are completed or aborted); and the markers of tag writes
        that never finished (a killed writer: readers re-read that tag until it is settled)."""
        prefix = self._key(repo, "blobs", "")
        found = [
            StaleUpload(f"{marker['Key']}#{PENDING_WRITE}", 0, _epoch(marker.get("LastModified")))
            for marker in self.index.stale_markers(self._key(repo))
            if _epoch(marker.get("LastModified")) < started_before
        ]
        markers: dict[str, str] = {}
        while True:
            resp = self.ops.call("list_multipart_uploads", Prefix=prefix, **markers)
            for upload in resp.get("Uploads") or []:
                key, upload_id = str(upload["Key"]), str(upload["UploadId"])
                parts = self.ops.call("list_parts", key, UploadId=upload_id).get("Parts") or []
                times = [_epoch(upload.get("Initiated")), *(_epoch(p.get("LastModified")) for p in parts)]
                if max(times) < started_before:
                    found.append(StaleUpload(f"{key}#{upload_id}", sum(int(p["Size"]) for p in parts), times[0]))
            if not resp.get("IsTruncated"):
                return found
            markers = {
                "KeyMarker": str(resp.get("NextKeyMarker") or ""),
                "UploadIdMarker": str(resp.get("NextUploadIdMarker") or ""),
            }

    def remove_stale_upload(self, repo: str, upload: StaleUpload) -> None:
        key, _, upload_id = upload.name.rpartition("#")
        if upload_id == PENDING_WRITE and key.startswith(self.index.pending_prefix(self._key(repo))):
            self.index.settle(self._key(repo), key)
            return
        if not key.startswith(self._key(repo, "blobs", "")) or not upload_id:
            raise InputError(f"not an upload of {repo}: {upload.name!r}")
        self.transfers.abort(key, upload_id)

    def list_blobs(self, repo: str) -> list[str] | None:
        names = self._names(self._key(repo, "blobs", "sha256", ""))
        if not names:
            self._require_repo(repo)
        return [f"sha256:{n}" for n in names if DIGEST_RE.match(f"sha256:{n}")]

    # -- manifests and tags ----------------------------------------------------------------
    def put_manifest(self, repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        if sha256_digest(manifest.data) != manifest.digest:
            raise IntegrityError(f"manifest bytes do not match {manifest.digest}")
        key = self.manifest_key(repo, manifest.digest)
        if tag is not None:
            _check_tag(tag)
        self._ensure_repo(repo)
        self.ops.call(
            "put_object",
            key,
            Body=manifest.data,
            ContentType=manifest.media_type,
            ChecksumSHA256=sha256_b64(manifest.digest),
        )
        descriptor = Descriptor(manifest.media_type, manifest.digest, len(manifest.data))
        referrer = self._referrer_of(manifest)
        if referrer is not None:
            subject, entry = referrer
            self.ops.call(
                "put_object",
                self.referrer_key(repo, subject, manifest.digest),
                Body=_json(entry.as_oci()),
                ContentType=DESCRIPTOR_MEDIA_TYPE,
            )
        if tag is not None:
            self._set_tag(repo, tag, descriptor)

    @staticmethod
    def _referrer_of(manifest: ManifestData) -> tuple[str, Descriptor] | None:
        """(subject digest, referrer descriptor) when the manifest has an OCI 1.1 subject."""
        try:
            parsed = json.loads(manifest.data)
        except ValueError:
            return None
        subject = parsed.get("subject") if isinstance(parsed, dict) else None
        digest = subject.get("digest") if isinstance(subject, dict) else None
        if not isinstance(digest, str) or not DIGEST_RE.match(digest):
            return None
        artifact_type = parsed.get("artifactType") or (parsed.get("config") or {}).get("mediaType")
        return digest, Descriptor(
            media_type=manifest.media_type,
            digest=manifest.digest,
            size=len(manifest.data),
            annotations={str(k): str(v) for k, v in (parsed.get("annotations") or {}).items()},
            artifact_type=artifact_type,
        )

    def _read_tag(self, key: str) -> tuple[bytes, str] | None:
        try:
            data, etag, _ = self.ops.get_bytes(key)
        except KeyMissing:
            return None
        return data, etag

    def _set_tag(self, repo: str, tag: str, descriptor: Descriptor) -> None:
        """Point tag at descriptor: compare-and-swap on the tag object's ETag, retried."""
        key = self.tag_key(repo, tag)
        body = _json(descriptor.as_oci())
        contention = _contention(f"moving tag {tag!r} of {self._url(repo)}")
        current = self._read_tag(key)
        if current is not None and current[0] == body:
            return  # already there (a re-push): nothing to write, nothing to index
        with self.index.changing(self._key(repo), tag):
            for _attempt in range(1, TAG_ATTEMPTS + 1):
                try:
                    if current is None:
                        self._put_small(key, body, DESCRIPTOR_MEDIA_TYPE, IfNoneMatch="*")
                    elif current[0] != body:
                        self._put_small(key, body, DESCRIPTOR_MEDIA_TYPE, IfMatch=current[1])
                    return
                except (ConditionFailed, KeyMissing):  # moved or deleted since we read it
                    contention.wait("another writer changed the tag meanwhile")
                current = self._read_tag(key)
        raise ExistsError(
            f"tag {tag!r} of {self._url(repo)} kept changing: other writers won {TAG_ATTEMPTS} times in a row",
            hint="other pushes are moving this tag; run the command again",
        )

    def _truth(self, repo: str, tag: str) -> str | bool | None:
        """For the tag index: the digest the tag object names, None if it names none, False
        if there is no tag object."""
        current = self._read_tag(self.tag_key(repo, tag))
        if current is None:
            return False
        with suppress(IntegrityError):
            return self._tag_target(repo, tag, current[0]).digest
        return None

    def _tag_target(self, repo: str, tag: str, data: bytes) -> Descriptor:
        try:
            found = Descriptor.from_oci(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError):
            found = None
        if found is None or not DIGEST_RE.match(found.digest):
            raise IntegrityError(
                f"tag {tag!r} of {self._url(repo)} is not a descriptor",
                hint="move the tag again (trainops registry tag) or delete it",
            )
        return found

    def get_manifest(self, repo: str, reference: str) -> ManifestData:
        media_type: str | None = None
        if DIGEST_RE.match(reference):
            digest = reference
        else:
            tagged = self._read_tag(self.tag_key(repo, reference))
            if tagged is None:
                self._require_repo(repo)
                raise NotFoundError(
                    f"no tag {reference!r} in {self._url(repo)}",
                    hint="`trainops registry ls` lists the tags",
                )
            target = self._tag_target(repo, reference, tagged[0])
            digest, media_type = target.digest, target.media_type
        try:
            data, _, content_type = self.ops.get_bytes(self.manifest_key(repo, digest))
        except KeyMissing:
            if media_type is not None:
                raise NotFoundError(
                    f"tag {reference!r} of {self._url(repo)} points at {digest}, which is gone",
                    hint="push the artifact again or delete the tag",
                ) from None
            self._require_repo(repo)
            raise NotFoundError(f"no manifest {digest} in {self._url(repo)}") from None
        if sha256_digest(data) != digest:
            raise IntegrityError(
                f"manifest {digest} in {self._url(repo)} is corrupt (its bytes hash differently)",
                hint="push the artifact again",
            )
        if media_type is None:
            media_type = content_type if content_type not in _GENERIC_TYPES else None
        if media_type is None:
            try:
                media_type = str(json.loads(data).get("mediaType") or media.OCI_MANIFEST)
            except (ValueError, AttributeError):
                media_type = media.OCI_MANIFEST
        return ManifestData(data=data, media_type=media_type, digest=digest)

    def list_tags(self, repo: str) -> list[str]:
        """From the tag index (one LIST of pending writes and SHARDS GETs), or by listing the
        tag objects where the repository has no complete index."""
        indexed = self.index.read(self._key(repo))
        tags = sorted(indexed) if indexed is not None else self._names(self._key(repo, "tags", ""))
        if not tags:
            self._require_repo(repo)
        return tags

    def tag_targets(self, repo: str) -> dict[str, str] | None:
        """The tag index, when it knows every tag's digest (tags indexed by a build from a
        listing are known by name only until their next write)."""
        indexed = self.index.read(self._key(repo))
        if indexed is None:
            return None
        if not indexed:
            self._require_repo(repo)
        known = {tag: digest for tag, digest in indexed.items() if digest is not None}
        return known if len(known) == len(indexed) else None

    def delete_tag(self, repo: str, tag: str) -> None:
        key = self.tag_key(repo, tag)
        try:
            self.ops.call("head_object", key)
        except KeyMissing:
            self._require_repo(repo)
            raise NotFoundError(f"no tag {tag!r} in {self._url(repo)}") from None
        with self.index.changing(self._key(repo), tag):
            self.ops.call("delete_object", key)

    def delete_manifest(self, repo: str, digest: str) -> None:
        key = self.manifest_key(repo, digest)
        try:
            data, _, content_type = self.ops.get_bytes(key)
        except KeyMissing:
            self._require_repo(repo)
            raise NotFoundError(f"no manifest {digest} in {self._url(repo)}") from None
        indexed = self.index.read(self._key(repo))
        if indexed is None:
            candidates = self._names(self._key(repo, "tags", ""))
        else:  # the index (pending writes read from their tag objects) narrows it down
            candidates = sorted(tag for tag, target in indexed.items() if target in (None, digest))
        for tag in candidates:
            self._untag_if(repo, tag, digest)
        manifest = ManifestData(data, str(content_type or media.OCI_MANIFEST), digest)
        referrer = self._referrer_of(manifest)
        if referrer is not None:
            self.ops.call("delete_object", self.referrer_key(repo, referrer[0], digest))
        self.ops.call("delete_object", key)

    def _untag_if(self, repo: str, tag: str, digest: str) -> None:
        """Delete tag if it points at digest, unless another writer moves it meanwhile."""
        key = self.tag_key(repo, tag)
        current = self._read_tag(key)
        if current is None or _pointed(current[0]) != digest:
            return
        contention = _contention(f"removing tag {tag!r} of {self._url(repo)}")
        with self.index.changing(self._key(repo), tag):
            self._untag_loop(key, digest, contention)

    def _untag_loop(self, key: str, digest: str, contention: Backoff) -> None:
        for _attempt in range(1, TAG_ATTEMPTS + 1):
            current = self._read_tag(key)
            if current is None or _pointed(current[0]) != digest:
                return
            try:
                self.ops.call("delete_object", key, IfMatch=current[1])
                return
            except ConditionFailed:
                contention.wait("another writer changed the tag meanwhile")
            except Unsupported:  # a server without conditional deletes
                self.ops.call("delete_object", key)
                return

    def list_manifests(self, repo: str) -> list[str]:
        names = self._names(self._key(repo, "manifests", "sha256", ""))
        if not names:
            self._require_repo(repo)
        return [f"sha256:{n}" for n in names if DIGEST_RE.match(f"sha256:{n}")]

    def list_repositories(self) -> list[str]:
        """Walk the prefixes under the root's prefix one level at a time (Delimiter="/")."""
        top = self.root.prefix.strip("/")
        found: list[str] = []
        queue: deque[str] = deque([f"{top}/" if top else ""])
        while queue:
            prefix = queue.popleft()
            is_repo = False
            subdirs: list[str] = []
            pages = self.ops.pages(prefix, page_size=self.page_size, delimiter="/")
            for objects, prefixes in pages:
                is_repo = is_repo or any(o.get("Key") == prefix + MARKER for o in objects)
                subdirs += prefixes
            if is_repo and prefix:
                found.append(prefix.rstrip("/"))
            for sub in subdirs:
                if not (is_repo and sub[len(prefix) :].rstrip("/") in RESERVED):
                    queue.append(sub)
        return sorted(found)

    # -- referrers -------------------------------------------------------------------------
    def referrers(self, repo: str, digest: str) -> list[Descriptor]:
        found: dict[str, Descriptor] = {}
        for key in self.ops.keys(self._key(repo, "referrers", _hex(digest), ""), page_size=self.page_size):
            try:
                data, _, _ = self.ops.get_bytes(key)
            except KeyMissing:  # deleted meanwhile
                continue
            try:
                entry = Descriptor.from_oci(json.loads(data))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            found[entry.digest] = entry
        if not found:
            self._require_repo(repo)
        return [found[d] for d in sorted(found)]

    def close(self) -> None:
        self.transfers.close()
        self.client.close()


def _pointed(data: bytes) -> Any:
    """The digest a tag object's descriptor names (None if it is not a descriptor)."""
    try:
        return json.loads(data).get("digest")
    except (ValueError, AttributeError):
        return None


def _epoch(value: Any) -> float:
    """A boto3 timestamp (a datetime) as seconds since the epoch; 0 when absent."""
    return float(value.timestamp()) if hasattr(value, "timestamp") else 0.0
