"""Blob uploads of the s3:// backend: verified multipart uploads that resume.

A blob up to one part size is hashed in memory and sent with one PutObject that carries its
SHA-256 (S3 checks it too). A larger blob is a multipart upload that trainops drives itself,
so it controls when the object becomes visible: the calling thread reads the source once, in
order, hashing every byte it hands to the part threads; CompleteMultipartUpload is called
only when that digest and size match the BlobSource. On a mismatch the upload is aborted. On
any other failure (a crash, a network error, an exception from progress) the upload is left
pending, and the next upload of the same blob finds it (ListMultipartUploads, ListParts) and
sends only the parts S3 does not already hold with the same bytes: the part size is a
function of the blob size, so every part's offset is known, and a kept part must match the
local bytes by CRC-32 (or its MD5 ETag), otherwise it is sent again.

Memory stays flat: parts live in at most max_concurrency + 1 reused buffers, shared by all
uploads of one backend. Downloads are in download.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, BinaryIO

from trainops.errors import InputError, IntegrityError
from trainops.registry.backends.base import BlobSource, Progress
from trainops.registry.backends.s3.client import (
    KeyMissing,
    S3Ops,
    UploadMissing,
    crc32_b64,
    sha256_b64,
)

MiB = 1024 * 1024
MIN_PART_SIZE = 5 * MiB  # S3's minimum for every part but the last
MAX_PARTS = 10_000
MAX_COPY_OBJECT = 5 * 1024 * MiB  # CopyObject's limit; larger blobs copy part by part
COPY_PART_SIZE = 512 * MiB
DEFAULT_PART_SIZE = 8 * MiB
DEFAULT_CONCURRENCY = 8
STREAM_RETRIES = 5
BLOB_CONTENT_TYPE = "application/octet-stream"


def part_size_for(size: int, configured: int) -> int:
    """The part size of a blob: the configured size, grown (in MiB) to fit in 10,000 parts."""
    needed = -(-size // MAX_PARTS)
    return -(-max(configured, needed, MIN_PART_SIZE) // MiB) * MiB


@dataclass(frozen=True)
class TransferSettings:
    part_size: int = DEFAULT_PART_SIZE
    max_concurrency: int = DEFAULT_CONCURRENCY
    download_concurrency: int = 1  # > 1: parallel ranged GETs for blobs above part_size
    stream_retries: int = STREAM_RETRIES


@dataclass(frozen=True)
class RemotePart:
    """A part S3 already holds for a pending upload (from ListParts)."""

    number: int
    size: int
    etag: str
    crc32: str | None

    def holds(self, data: bytes | bytearray | memoryview) -> bool:
        """True when this part has exactly these bytes (by CRC-32, else by MD5 ETag)."""
        if self.size != len(data):
            return False
        if self.crc32:
            return self.crc32 == crc32_b64(data)
        etag = self.etag.strip('"')
        return len(etag) == 32 and etag == hashlib.md5(data, usedforsecurity=False).hexdigest()


def _read_exact(fh: BinaryIO, size: int) -> bytes:
    first = fh.read(size)
    if len(first) == size or not first:
        return first
    pieces = [first]
    got = len(first)
    while got < size:
        more = fh.read(size - got)
        if not more:
            break
        pieces.append(more)
        got += len(more)
    return b"".join(pieces)


def _read_into(fh: BinaryIO, buf: bytearray, size: int) -> int:
    """Fill buf[:size] from fh; the count read (short only at the end of the stream)."""
    readinto = getattr(fh, "readinto", None)
    got = 0
    with memoryview(buf) as view:
        while got < size:
            if readinto is not None:
                n = readinto(view[got:size])
            else:
                chunk = fh.read(size - got)
                n = len(chunk)
                view[got : got + n] = chunk
            if not n:
                break
            got += n
    return got


class PartBuffers:
    """At most count part-sized buffers, made on first use and reused: RSS stays flat.

    (Fresh multi-MiB bytes per part would be kept by glibc's heap across threads: measured,
    about 1.5x the bytes in flight.)
    """

    def __init__(self, count: int) -> None:
        self._free: list[bytearray] = []
        self._made = 0
        self._count = count
        self._cond = threading.Condition()

    def take(self, size: int) -> bytearray:
        with self._cond:
            while not self._free and self._made >= self._count:
                self._cond.wait()
            if self._free:
                buf = self._free.pop()
            else:
                self._made += 1
                buf = bytearray(size)
        return buf if len(buf) == size else bytearray(size)

    def give(self, buf: bytearray) -> None:
        with self._cond:
            self._free.append(buf)
            self._cond.notify()


def _integrity(what: str, digest: str, size: int, actual_digest: str, actual_size: int) -> None:
    if actual_size != size:
        raise IntegrityError(
            f"{what}: the source has {actual_size} bytes, expected {size}",
            hint="the file changed or is damaged; nothing was stored — rescan and push again",
        )
    if actual_digest != digest:
        raise IntegrityError(
            f"{what}: the source hashes to {actual_digest}, expected {digest}",
            hint="the file changed or is damaged; nothing was stored — rescan and push again",
        )


class Transfers:
    """Blob uploads and copies of one backend, sharing its client, threads and part buffers."""

    def __init__(self, ops: S3Ops, settings: TransferSettings) -> None:
        if settings.part_size < MIN_PART_SIZE:
            raise InputError(
                f"S3 part size {settings.part_size} is below S3's minimum of {MIN_PART_SIZE} bytes",
                hint="use a part size of at least 5 MiB",
            )
        self.ops = ops
        self.settings = settings
        self._buffers = PartBuffers(settings.max_concurrency + 1)  # one read ahead
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.settings.max_concurrency, thread_name_prefix="trainops-s3"
                )
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    # -- uploads ---------------------------------------------------------------------------
    def upload(self, key: str, source: BlobSource, progress: Progress, what: str) -> None:
        if source.size <= self.settings.part_size:
            self._put_single(key, source, progress, what)
            return
        for attempt in (1, 2):
            try:
                self._multipart(key, source, progress, what, resume=attempt == 1)
                return
            except UploadMissing:
                # Another writer of the same blob completed (or aborted) the upload we used.
                if self.present(key) == source.size:
                    return
                if attempt == 2:
                    raise

    def present(self, key: str) -> int | None:
        try:
            return int(self.ops.call("head_object", key)["ContentLength"])
        except KeyMissing:
            return None

    def _put_single(self, key: str, source: BlobSource, progress: Progress, what: str) -> None:
        with source.open() as fh:
            data = _read_exact(fh, source.size)
            extra = len(fh.read(1)) if len(data) == source.size else 0
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        _integrity(what, source.digest, source.size, actual, len(data) + extra)
        self.ops.call(
            "put_object",
            key,
            Body=data,
            ContentType=BLOB_CONTENT_TYPE,
            ChecksumSHA256=sha256_b64(source.digest),
        )
        progress(len(data))

    def pending(self, key: str) -> tuple[str | None, dict[int, RemotePart]]:
        """The newest unfinished multipart upload of key and the parts it holds."""
        uploads: list[dict[str, Any]] = []
        markers: dict[str, str] = {}
        while True:
            resp = self.ops.call("list_multipart_uploads", Prefix=key, **markers)
            uploads += [u for u in resp.get("Uploads") or [] if u.get("Key") == key]
            if not resp.get("IsTruncated"):
                break
            markers = {
                "KeyMarker": str(resp.get("NextKeyMarker") or ""),
                "UploadIdMarker": str(resp.get("NextUploadIdMarker") or ""),
            }
        if not uploads:
            return None, {}
        newest = max(uploads, key=lambda u: str(u.get("Initiated") or ""))
        upload_id = str(newest["UploadId"])
        parts: dict[int, RemotePart] = {}
        marker = 0
        try:
            while True:
                resp = self.ops.call("list_parts", key, UploadId=upload_id, PartNumberMarker=marker)
                for p in resp.get("Parts") or []:
                    number = int(p["PartNumber"])
                    parts[number] = RemotePart(number, int(p["Size"]), str(p["ETag"]), p.get("ChecksumCRC32"))
                next_marker = int(resp.get("NextPartNumberMarker") or 0)
                if not resp.get("IsTruncated") or next_marker <= marker:
                    break
                marker = next_marker
        except UploadMissing:
            return None, {}
        return upload_id, parts

    def _multipart(self, key: str, source: BlobSource, progress: Progress, what: str, *, resume: bool) -> None:
        upload_id, remote = self.pending(key) if resume else (None, {})
        resumed = upload_id is not None
        if upload_id is None:
            created = self.ops.call(
                "create_multipart_upload",
                key,
                ContentType=BLOB_CONTENT_TYPE,
                ChecksumAlgorithm="CRC32",
            )
            upload_id = str(created["UploadId"])
        try:
            parts = self._send_parts(key, upload_id, source, remote, progress, what)
        except IntegrityError:
            self.abort(key, upload_id)
            raise
        self.ops.call(
            "complete_multipart_upload",
            key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
        )
        if resumed:
            self._abort_others(key, upload_id)

    def abort(self, key: str, upload_id: str) -> None:
        with contextlib.suppress(UploadMissing):
            self.ops.call("abort_multipart_upload", key, UploadId=upload_id)

    def _abort_others(self, key: str, keep: str) -> None:
        """Drop other pending uploads of a blob that is now complete (they can only waste space)."""
        resp = self.ops.call("list_multipart_uploads", Prefix=key)
        for upload in resp.get("Uploads") or []:
            if upload.get("Key") == key and upload.get("UploadId") != keep:
                self.abort(key, str(upload["UploadId"]))

    def _send_parts(
        self,
        key: str,
        upload_id: str,
        source: BlobSource,
        remote: dict[int, RemotePart],
        progress: Progress,
        what: str,
    ) -> list[dict[str, Any]]:
        size = source.size
        part_size = part_size_for(size, self.settings.part_size)
        count = -(-size // part_size)
        pool = self.pool()
        digest = hashlib.sha256()
        read = 0
        done: dict[int, dict[str, Any]] = {}
        inflight: dict[Future[dict[str, Any]], tuple[int, bytearray]] = {}

        def drain(limit: int) -> None:
            while len(inflight) > limit:
                finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for fut in finished:
                    length, _buf = inflight.pop(fut)
                    part = fut.result()
                    done[int(part["PartNumber"])] = part
                    progress(length)

        try:
            with source.open() as fh:
                for number in range(1, count + 1):
                    expected = min(part_size, size - (number - 1) * part_size)
                    drain(self.settings.max_concurrency - 1)
                    buf = self._buffers.take(part_size)
                    submitted = False
                    try:
                        got = _read_into(fh, buf, expected)
                        with memoryview(buf)[:got] as view:
                            digest.update(view)
                            read += got
                            if got != expected:
                                break
                            kept = remote.get(number)
                            if kept is not None and kept.holds(view):
                                done[number] = {
                                    "PartNumber": number,
                                    "ETag": kept.etag,
                                    "ChecksumCRC32": crc32_b64(view),
                                }
                                progress(expected)
                                continue
                            # botocore takes bytes or bytearray, not views: copy a short last part
                            body = buf if got == len(buf) else bytes(view)
                        fut = pool.submit(self._put_part, key, upload_id, number, body, buf)
                        submitted = True
                        inflight[fut] = (expected, buf)
                    finally:
                        if not submitted:
                            self._buffers.give(buf)
                if read == size:
                    read += len(fh.read(1))
            drain(0)
        except BaseException:
            self._cancel(inflight)
            raise
        _integrity(what, source.digest, size, "sha256:" + digest.hexdigest(), read)
        return [done[n] for n in sorted(done)]

    def _cancel(self, inflight: dict[Future[dict[str, Any]], tuple[int, bytearray]]) -> None:
        """Stop parts not yet started and wait for running ones (no thread outlives a call)."""
        for fut, (_length, buf) in inflight.items():
            if fut.cancel():
                self._buffers.give(buf)  # it never ran, so it never gave its buffer back
        wait(list(inflight))

    def _put_part(
        self,
        key: str,
        upload_id: str,
        number: int,
        body: bytes | bytearray,
        buf: bytearray,
    ) -> dict[str, Any]:
        try:
            crc = crc32_b64(body)  # here, in the part's thread: the reader only hashes
            resp = self.ops.call(
                "upload_part",
                key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                ChecksumCRC32=crc,
            )
            return {"PartNumber": number, "ETag": str(resp["ETag"]), "ChecksumCRC32": crc}
        finally:
            self._buffers.give(buf)

    # -- server-side copies -------------------------------------------------------------------
    def copy(self, src: str, dst: str, size: int) -> None:
        """Copy a verified blob to another key inside the bucket (S3 copies the bytes exactly)."""
        source = {"Bucket": self.ops.bucket, "Key": src}
        if size <= MAX_COPY_OBJECT:
            self.ops.call(
                "copy_object",
                dst,
                CopySource=source,
                ContentType=BLOB_CONTENT_TYPE,
                MetadataDirective="REPLACE",
            )
            return
        part_size = part_size_for(size, COPY_PART_SIZE)
        upload_id = str(self.ops.call("create_multipart_upload", dst, ContentType=BLOB_CONTENT_TYPE)["UploadId"])

        def one(number: int) -> dict[str, Any]:
            start = (number - 1) * part_size
            end = min(start + part_size, size) - 1
            resp = self.ops.call(
                "upload_part_copy",
                dst,
                UploadId=upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceRange=f"bytes={start}-{end}",
            )
            return {"PartNumber": number, "ETag": str(resp["CopyPartResult"]["ETag"])}

        try:
            parts = list(self.pool().map(one, range(1, -(-size // part_size) + 1)))
            self.ops.call(
                "complete_multipart_upload",
                dst,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            self.abort(dst, upload_id)
            raise
