"""Blob downloads of the oci:// backend: every byte hashed, resumed where a connection drops.

The first GET asks for the first PART bytes (Range); the answer's Content-Range gives the
blob's size. A blob under RANGED_MIN continues as one stream, hashed as it is written. A
larger one is fetched as PART-sized ranges by RANGE_JOBS connections at once, each written
in place (pwrite) from a reused buffer, while this thread hashes the file in order right
behind them (the pages are still in the page cache): the registry serves several ranges at
once, and receiving, writing and hashing overlap. Measured on Distribution on a loaded
2-core machine, 1 GiB: one stream with requests ~1.9 s, four ranges ~1.2 s, curl 0.8 s
(unverified). A registry that ignores Range (200) is read as one stream. Each range that
breaks off is asked for again from its last byte; the digest over all of them is checked
at the end, so a damaged range fails the download.

An interrupted download keeps what it wrote in order (a ranged one: up to the first byte
not yet written, the file cut there): a later download to the same file hashes those
bytes and asks for the rest (Range), one stream; the digest over all of it is checked as
before, and a kept part that does not verify is dropped and the blob fetched whole once.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

from trainops.errors import IntegrityError, RemoteError
from trainops.registry.backends.base import Progress, check_range, no_progress, read_exact, read_span
from trainops.registry.backends.oci.http import Response, TransportError
from trainops.registry.backends.oci.session import ATTEMPTS, RegistrySession, logger, pull_scope
from trainops.retry import Backoff, RetryPolicy

PART = 16 * 1024 * 1024
RANGED_MIN = 64 * 1024 * 1024
RANGE_JOBS = 4
BUFFER = 256 * 1024  # receive buffer of a range: fits a core's L2 cache, so the write that follows reads it there
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _write_all(fd: int, data: memoryview, offset: int | None) -> None:
    while data:
        n = os.write(fd, data) if offset is None else os.pwrite(fd, data, offset)
        data = data[n:]
        if offset is not None:
            offset += n


class Downloads:
    """The blob downloads of one backend (its session: auth, retries, errors)."""

    def __init__(self, session: RegistrySession) -> None:
        self.session = session
        self.host = session.host
        self.jobs = RANGE_JOBS
        self.part = PART
        self.ranged_min = RANGED_MIN
        self.ranges_ignored = False  # set by the first Range request answered with the whole blob

    def _get(self, repo: str, digest: str, start: int, end: int | None, *, empty_ok: bool = False) -> Response:
        """A GET of the blob from start (to end, inclusive): 206, or 200 where Range is ignored.
        With empty_ok, a 416 (an empty blob has no byte 0) is answered by a plain GET."""
        span = f"bytes={start}-{'' if end is None else end}"
        path = f"/v2/{repo}/blobs/{digest}"
        ok = (200, 206, 416) if empty_ok else (200, 206)
        headers = {"Range": span, "Accept-Encoding": "identity"}
        resp = self.session.request("GET", path, scope=pull_scope(repo), ok=ok, headers=headers, stream=True)
        if resp.status_code == 416:
            resp.close()
            resp = self.session.request("GET", path, scope=pull_scope(repo), ok=(200,), stream=True)
        return resp

    def download(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        what = f"blob {digest[:19]} from {self.host}/{repo}"
        kept = [0]  # bytes written in order so far: what an interrupted download leaves
        try:
            fd = os.open(dest, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                held = os.fstat(fd).st_size
                found = self._resume(repo, digest, fd, held, progress, what, kept) if held else None
                if found != digest:  # nothing kept, or what was kept is not this blob's start
                    os.ftruncate(fd, 0)
                    os.lseek(fd, 0, os.SEEK_SET)
                    kept[0] = 0
                    found = self._fetch(repo, digest, fd, progress, what, kept)
            finally:
                os.close(fd)
            if found != digest:
                raise IntegrityError(
                    f"{what}: content has digest {found}, expected {digest}",
                    hint="the stored blob is corrupt or was tampered with; nothing was kept",
                )
        except (IntegrityError, RemoteError) as err:
            if isinstance(err, IntegrityError) or not kept[0]:
                dest.unlink(missing_ok=True)
            else:
                _cut(dest, kept[0])
            raise
        except BaseException:  # Ctrl-C: keep what was written in order, for the next run
            _cut(dest, kept[0])
            raise

    def _resume(
        self, repo: str, digest: str, fd: int, held: int, progress: Progress, what: str, kept: list[int]
    ) -> str | None:
        """The digest of the blob when the file's held bytes are its start and the rest comes
        (Range from held); None when the registry answers with the whole blob or none."""
        kept[0] = held  # kept as it is if this is interrupted
        sha = hashlib.sha256()
        buffer = bytearray(4 * BUFFER)
        view = memoryview(buffer)
        at = 0
        while at < held:
            n = os.preadv(fd, [view[: min(len(buffer), held - at)]], at)
            if n <= 0:
                break
            sha.update(view[:n])
            at += n
        resp = self._get(repo, digest, held, None, empty_ok=True)
        if resp.status_code != 206:  # 200: Range ignored; 416: the file is not shorter than the blob
            resp.close()
            return None
        _check_start(resp, held, self.host, digest)
        progress(held)
        os.lseek(fd, held, os.SEEK_SET)
        return self._stream(repo, digest, fd, resp, _total(resp), progress, what, sha=sha, written=held, kept=kept)

    def _fetch(self, repo: str, digest: str, fd: int, progress: Progress, what: str, kept: list[int]) -> str:
        resp = self._get(repo, digest, 0, self.part - 1, empty_ok=True)
        if resp.status_code == 206:
            _check_start(resp, 0, self.host, digest, last=self.part - 1)
        total = _total(resp)
        if resp.status_code == 206 and total is not None and total >= self.ranged_min and self.jobs > 1:
            return _Ranged(self, repo, digest, fd, total, progress, kept).run(resp)
        return self._stream(repo, digest, fd, resp, total, progress, what, kept=kept)

    def _stream(
        self,
        repo: str,
        digest: str,
        fd: int,
        resp: Response,
        total: int | None,
        progress: Progress,
        what: str,
        *,
        kept: list[int],
        sha: hashlib._Hash | None = None,
        written: int = 0,
    ) -> str:
        """One stream, hashed as written; a dropped connection continues from its last byte.
        sha, written: the hash and count of the bytes the file already holds (a resume);
        total: the blob's size (a resumed 206 names it)."""
        sha = sha or hashlib.sha256()
        buffer = bytearray(BUFFER)
        view = memoryview(buffer)
        backoff = Backoff(f"download of {what}", policy=RetryPolicy(attempts=ATTEMPTS))
        while True:
            try:
                with resp:
                    while n := resp.readinto(view):
                        sha.update(view[:n])
                        _write_all(fd, view[:n], None)
                        written += n
                        kept[0] = written
                        progress(n)
                if total is None or written >= total:  # the whole body, cleanly ended
                    return "sha256:" + sha.hexdigest()
            except TransportError as err:
                if not backoff.wait(f"the download broke off after {written} bytes: {err}"):
                    raise RemoteError(f"downloading {digest[:19]} from {self.host} kept failing") from None
            resp = self._get(repo, digest, written, None)
            if resp.status_code == 200:  # no Range support: start over
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                sha, written = hashlib.sha256(), 0
                kept[0] = 0
            else:
                _check_start(resp, written, self.host, digest)
            total = _total(resp) if total is None else total

    # -- reading without a file ------------------------------------------------------------
    def open(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        resp = self.session.request("GET", f"/v2/{repo}/blobs/{digest}", scope=pull_scope(repo), ok=(200,), stream=True)

        @contextlib.contextmanager
        def body() -> Iterator[BinaryIO]:
            try:
                yield io.BufferedReader(_Body(resp), BUFFER)
            finally:
                resp.close()

        return body()

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        """An HTTP Range GET. A 206 must carry a Content-Range that starts at offset; a
        registry that ignores Range (200) is read only up to offset + length, and said so."""
        check_range(offset, length)
        if length == 0:
            return b""
        resp = self.session.request(
            "GET",
            f"/v2/{repo}/blobs/{digest}",
            scope=pull_scope(repo),
            ok=(200, 206, 416),
            headers={"Range": f"bytes={offset}-{offset + length - 1}", "Accept-Encoding": "identity"},
            stream=True,
        )
        with resp:
            reader = io.BufferedReader(_Body(resp), BUFFER)
            if resp.status_code == 416:  # offset at or past the end
                return b""
            if resp.status_code == 200:
                if not self.ranges_ignored:  # said once per backend, not once per read
                    self.ranges_ignored = True
                    logger.warning(
                        "%s ignores HTTP Range requests: partial reads download blobs from their start "
                        "(chunked pulls read whole packs)",
                        self.host,
                    )
                return read_span(reader, offset, length)
            end = _check_start(resp, offset, self.host, digest, last=offset + length - 1)
            return read_exact(reader, end - offset + 1)


class _Body(io.RawIOBase):
    """A response body as a raw binary stream (for io.BufferedReader)."""

    def __init__(self, resp: Response) -> None:
        self.resp = resp

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            return self.resp.readinto(buffer)
        except TransportError as err:
            raise RemoteError(f"reading a blob from {self.resp.url.split('?', 1)[0]} failed: {err}") from None


def _cut(dest: Path, size: int) -> None:
    """Keep the first size bytes of an interrupted download (none: remove it)."""
    try:
        if size:
            os.truncate(dest, size)
        else:
            dest.unlink(missing_ok=True)
    except OSError:
        dest.unlink(missing_ok=True)


def _total(resp: Response) -> int | None:
    """The blob's size from a 206's Content-Range, or a 200's Content-Length."""
    if resp.status_code == 206:
        found = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
        return int(found[3]) if found and found[3] != "*" else None
    return resp.length


def _check_start(resp: Response, start: int, host: str, digest: str, last: int | None = None) -> int:
    """The last byte a 206 holds; it must start at start (and end by last)."""
    found = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
    if not found or int(found[1]) != start or (last is not None and int(found[2]) > last):
        resp.close()
        raise RemoteError(
            f"{host} answered a Range request for {digest} with Content-Range "
            f"{resp.headers.get('Content-Range')!r}, not bytes {start}-{'' if last is None else last}",
            hint="the registry or a proxy in front of it mishandles Range requests",
        )
    return int(found[2])


class _Ranged:
    """One blob as parallel ranges: workers write them in place, this thread hashes in order."""

    def __init__(
        self, owner: Downloads, repo: str, digest: str, fd: int, total: int, progress: Progress, kept: list[int]
    ) -> None:
        self.owner, self.repo, self.digest, self.fd, self.total = owner, repo, digest, fd, total
        self.progress, self.kept = progress, kept
        part = owner.part
        self.starts = list(range(0, total, part))
        self.done = [0] * len(self.starts)  # bytes of each part written so far
        self.next = 1  # part 0 comes with the first response
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.stop = False
        self.reading: set[Response] = set()  # the responses workers are reading now
        self.backoff = Backoff(
            f"download of {digest[:19]} from {owner.host}/{repo}", policy=RetryPolicy(attempts=ATTEMPTS * 2)
        )

    def _end(self, index: int) -> int:
        return min(self.total, self.starts[index] + self.owner.part)

    def run(self, first: Response) -> str:
        workers = [threading.Thread(target=self._work, args=(first,), daemon=True)]
        workers += [
            threading.Thread(target=self._work, args=(None,), daemon=True)
            for _ in range(min(self.owner.jobs, len(self.starts)) - 1)
        ]
        for worker in workers:
            worker.start()
        try:
            return self._hash()
        finally:
            # Stop the workers before the caller closes the file they write to (an error,
            # Ctrl-C): a read blocked on a socket returns once its connection is ended.
            with self.cond:
                self.stop = True
                for resp in self.reading:
                    resp.abort()
            for worker in workers:
                worker.join()

    def _claim(self) -> int | None:
        with self.cond:
            if self.stop or self.next >= len(self.starts):
                return None
            self.next += 1
            return self.next - 1

    def _work(self, first: Response | None) -> None:
        buffer = bytearray(BUFFER)
        try:
            if first is not None:
                self._fill(0, first, buffer)
            while (index := self._claim()) is not None:
                self._fill(index, None, buffer)
        except BaseException as err:  # raised again on the hashing thread
            with self.cond:
                self.error = err
                self.stop = True
                self.cond.notify_all()
            if first is not None:
                first.close()

    def _fill(self, index: int, resp: Response | None, buffer: bytearray) -> None:
        """Write part index, asking again from where it broke off; stop early on stop."""
        view = memoryview(buffer)
        start, end = self.starts[index], self._end(index)
        while True:
            at = start + self.done[index]
            if at >= end or self.stop:
                return
            if resp is None:
                resp = self.owner._get(self.repo, self.digest, at, end - 1)
                if resp.status_code != 206:
                    resp.close()
                    raise RemoteError(f"{self.owner.host} stopped answering Range requests for {self.digest}")
                _check_start(resp, at, self.owner.host, self.digest, last=end - 1)
            with self.cond:
                if self.stop:
                    resp.close()
                    return
                self.reading.add(resp)
            try:
                with resp:
                    while not self.stop and (n := resp.readinto(view[: end - at])):
                        _write_all(self.fd, view[:n], at)
                        at += n
                        with self.cond:
                            self.done[index] += n
                            self.cond.notify_all()
            except TransportError as err:
                if self.stop:  # ended by run(): the download is over
                    return
                with self.cond:
                    delay = self.backoff.next_delay(f"a range broke off: {err}")
                if delay is None:
                    raise RemoteError(f"downloading {self.digest[:19]} from {self.owner.host} kept failing") from None
                time.sleep(delay)
            finally:
                with self.cond:
                    self.reading.discard(resp)
            resp = None

    def _hash(self) -> str:
        sha = hashlib.sha256()
        buffer = bytearray(4 * BUFFER)
        view = memoryview(buffer)
        position = 0
        while position < self.total:
            index = position // self.owner.part
            with self.cond:
                while self.error is None and self.starts[index] + self.done[index] <= position:
                    self.cond.wait()
                if self.error is not None:
                    raise self.error
                ready = self.starts[index] + self.done[index] - position
            n = os.preadv(self.fd, [view[: min(ready, len(buffer))]], position)
            if n <= 0:
                raise RemoteError(f"{self.digest[:19]}: the file being downloaded shrank")
            sha.update(view[:n])
            position += n
            self.kept[0] = position  # every byte before it is written (it was just read back)
            self.progress(n)
        return "sha256:" + sha.hexdigest()
