"""Blob downloads of the s3:// backend: hashed while written, resumed if a connection drops.

By default one streaming GET, hashed as it is written; a dropped connection continues with
a ranged GET from the last byte received (If-Match the first ETag, so bytes of two objects
are never spliced). With download_concurrency > 1, blobs above one part size are fetched as
parallel ranged GETs, hashed and written in order. On moto's server the single stream is
several times faster than parallel ranges (moto copies the object for every ranged GET), so
it is the default; against AWS, parallel ranges pay off for big blobs.

The caller (S3Backend.download_blob) verifies the digest. Bytes are written in order, so an
interrupted download leaves the object's start: `resume` continues it with a ranged GET
(the caller hashes the bytes kept first, and verifies the whole as before).
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from trainops.errors import IntegrityError, RemoteError
from trainops.registry.backends.base import DigestWriter, Progress, check_range, read_exact, read_span
from trainops.registry.backends.s3.client import ConditionFailed, S3Ops, is_stream_error
from trainops.registry.backends.s3.transfer import TransferSettings, part_size_for
from trainops.retry import Backoff, RetryPolicy

STREAM_CHUNK = 1024 * 1024


class Downloads:
    """Blob downloads of one backend, sharing its client and threads."""

    def __init__(self, ops: S3Ops, settings: TransferSettings, pool: Callable[[], ThreadPoolExecutor]) -> None:
        self.ops = ops
        self.settings = settings
        self.pool = pool
        self._budget = threading.Semaphore(settings.download_concurrency + 1)  # ranges in memory

    def download(self, key: str, writer: DigestWriter, progress: Progress) -> None:
        """Write the object to writer (which hashes); the caller verifies and cleans up."""
        if self.settings.download_concurrency > 1:
            head = self.ops.call("head_object", key)
            size = int(head["ContentLength"])
            if size > self.settings.part_size:
                writer.expected_size = size
                self._ranged(key, str(head["ETag"]), size, writer, progress)
                return
        self._stream(key, writer, progress)

    def read_range(self, key: str, offset: int, length: int, where: str) -> bytes:
        """length bytes from offset (fewer at the end; b"" past it); KeyMissing if absent."""
        check_range(offset, length)
        if length == 0:
            return b""
        try:
            resp = self.ops.call("get_object", key, Range=f"bytes={offset}-{offset + length - 1}")
        except RemoteError as err:
            code = (getattr(err.__cause__, "response", None) or {}).get("Error", {}).get("Code")
            if code == "InvalidRange":
                return b""
            raise
        body = resp["Body"]
        try:
            found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", str(resp.get("ContentRange") or "").strip())
            if found is None:  # the store ignored Range: read only what was asked for
                return read_span(body, offset, length)
            if int(found[1]) != offset:
                raise RemoteError(f"{where}: S3 answered bytes {found[1]}- for a range from {offset}")
            return read_exact(body, min(length, int(found[2]) - offset + 1))
        finally:
            body.close()

    def continue_file(self, key: str, dest: Path, digest: str, progress: Progress, where: str) -> bool:
        """Continue dest, the blob's start that an interrupted download left; False when it
        cannot be continued or the whole does not verify (the caller downloads it whole)."""
        with dest.open("r+b") as out:
            writer = DigestWriter(out, digest, None)
            writer.take_kept()
            if not self.resume(key, writer, progress):
                return False
        try:
            writer.verify(where)
        except IntegrityError:
            return False
        return True

    def resume(self, key: str, writer: DigestWriter, progress: Progress) -> bool:
        """Continue a download whose first writer.written bytes writer already holds (and has
        hashed): the rest with a ranged GET. False when the object is not longer than that,
        or the store ignores Range (the caller then downloads it whole)."""
        try:
            resp = self.ops.call("get_object", key, Range=f"bytes={writer.written}-")
        except RemoteError as err:
            code = (getattr(err.__cause__, "response", None) or {}).get("Error", {}).get("Code")
            if code == "InvalidRange":
                return False
            raise
        found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", str(resp.get("ContentRange") or "").strip())
        if found is None or int(found[1]) != writer.written:
            resp["Body"].close()
            return False
        writer.expected_size = int(found[3])
        progress(writer.written)
        self._stream(key, writer, progress, first=resp)
        return True

    def _stream(self, key: str, writer: DigestWriter, progress: Progress, first: Any = None) -> None:
        """The object as one stream (first: the answer to a ranged GET that resumes it)."""
        etag: str | None = str(first["ETag"]) if first is not None else None
        backoff = self._backoff(key)
        while True:
            extra: dict[str, Any] = {}
            if first is not None:
                resp, first = first, None
            else:
                if etag is not None:
                    if writer.written >= (writer.expected_size or 0):
                        return
                    extra = {"Range": f"bytes={writer.written}-", "IfMatch": etag}
                try:
                    resp = self.ops.call("get_object", key, **extra)
                except ConditionFailed:
                    raise RemoteError(
                        f"s3://{self.ops.bucket}/{key} was replaced while it was being downloaded",
                        hint="run the command again",
                    ) from None
            if etag is None:
                etag = str(resp["ETag"])
                writer.expected_size = int(resp["ContentLength"])
            body = resp["Body"]
            try:
                for chunk in body.iter_chunks(STREAM_CHUNK):
                    writer.write(chunk)
                    progress(len(chunk))
                return
            except Exception as exc:
                if not is_stream_error(exc):
                    raise
                if not backoff.wait(f"the stream broke off: {type(exc).__name__}"):
                    raise self._dropped(key, exc) from exc
            finally:
                body.close()

    def _backoff(self, key: str) -> Backoff:
        policy = RetryPolicy(attempts=self.settings.stream_retries + 1, base=0.2)
        return Backoff(f"reading s3://{self.ops.bucket}/{key}", policy=policy)

    def _dropped(self, key: str, exc: BaseException) -> RemoteError:
        return RemoteError(
            f"the connection to {self.ops.endpoint} kept dropping while reading "
            f"s3://{self.ops.bucket}/{key} ({type(exc).__name__})",
            hint="check the network or the S3 service and run the command again",
        )

    def _get_range(self, key: str, etag: str, start: int, end: int) -> bytes:
        backoff = self._backoff(key)
        while True:
            resp = self.ops.call("get_object", key, Range=f"bytes={start}-{end - 1}", IfMatch=etag)
            try:
                with resp["Body"] as body:
                    data: bytes = body.read()
                return data
            except Exception as exc:
                if not is_stream_error(exc):
                    raise
                if not backoff.wait(f"the stream broke off: {type(exc).__name__}"):
                    raise self._dropped(key, exc) from exc

    def _ranged(self, key: str, etag: str, size: int, writer: DigestWriter, progress: Progress) -> None:
        part_size = part_size_for(size, self.settings.part_size)
        pool = self.pool()
        window: deque[Future[bytes]] = deque()

        def write_next() -> None:
            fut = window.popleft()
            try:
                data = fut.result()
            finally:
                self._budget.release()
            writer.write(data)
            progress(len(data))

        def acquire() -> None:
            # Never wait for memory while holding parts only this thread can release.
            while window:
                if self._budget.acquire(blocking=False):
                    return
                write_next()
            self._budget.acquire()

        try:
            for start in range(0, size, part_size):
                while len(window) >= self.settings.download_concurrency:
                    write_next()
                acquire()
                try:
                    window.append(pool.submit(self._get_range, key, etag, start, min(start + part_size, size)))
                except BaseException:
                    self._budget.release()
                    raise
            while window:
                write_next()
        except BaseException:
            for fut in window:
                if not fut.cancel():
                    wait([fut])
                self._budget.release()
            raise
