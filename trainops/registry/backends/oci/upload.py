"""Blob uploads of the oci:// backend.

- A blob whose digest is known goes in one PUT (the registry verifies the digest); a
  dropped upload resumes from the offset the registry reports, a lost session starts over.
- A large file whose digest is not known yet (a cold digest cache) is sent in one PATCH
  while a second thread hashes it (both read the same pages of the page cache), then the
  session is closed with a PUT of the digest: one pass over the file, not two.
- Large files (INGEST_MIN) go in a PATCH with a chunked body, and the session's location
  is kept (trainops.registry.resume) until the blob is complete. On Ctrl-C the body ends
  cleanly at a chunk's end instead of being cut, and the location the registry answers
  with is kept: the re-run asks the registry what the session holds (GET → 204 with
  Range), sends only the rest (PATCH), and closes it with the digest of the whole file,
  which the registry checks. (Distribution signs the offset into the location and drops
  a session whose data has another size, so a body cut mid-way cannot be resumed there:
  after a kill the upload starts over.)
- On plain HTTP the bytes go with sendfile (no copy through Python); on TLS, 8 MiB reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from trainops import interrupt
from trainops.errors import IntegrityError, NotFoundError, RemoteError, TrainopsError
from trainops.registry import resume
from trainops.registry.backends.base import BlobSource, Progress, no_progress
from trainops.registry.backends.oci.http import Response, TransportError, Upload
from trainops.registry.backends.oci.session import ATTEMPTS, RegistrySession, push_scope
from trainops.registry.digestcache import file_identity
from trainops.retry import RETRY_STATUS, Backoff, RetryPolicy

INGEST_MIN = 32 * 1024 * 1024  # files from this size are sent while they are hashed
HASH_CHUNK = 4 * 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}


class _Retry(Exception):
    """A transient failure worth another attempt."""


class FileHasher:
    """sha256 of a file computed on its own thread (hashlib and reads release the GIL)."""

    def __init__(self, path: Path) -> None:
        self._hash = hashlib.sha256()
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        buffer = bytearray(HASH_CHUNK)
        view = memoryview(buffer)
        try:
            with path.open("rb", buffering=0) as fh:
                while not self._stop.is_set() and (n := fh.readinto(buffer)):
                    self._hash.update(view[:n])
        except OSError as err:
            self._error = err

    def hexdigest(self) -> str:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._hash.hexdigest()

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()


T = TypeVar("T")


def _ending(call: Callable[[], T]) -> tuple[T, bool]:
    """call() on a helper thread, and whether Ctrl-C came meanwhile. Ctrl-C reaches the
    main thread only: here it cancels the transfers (the chunked body being sent then ends
    at a chunk's end, and its answer is read) instead of cutting call() short."""
    box: dict[str, T] = {}
    failed: list[BaseException] = []
    done = threading.Event()  # not Thread.join: a join that Ctrl-C interrupts can say the thread ended

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as err:  # raised again on the calling thread
            failed.append(err)
        finally:
            done.set()

    threading.Thread(target=run, name="oci-upload", daemon=True).start()
    interrupted = False
    while True:
        try:
            if done.wait(0.05):
                break
        except KeyboardInterrupt:
            interrupted = True
            interrupt.cancel()
    if failed:
        raise failed[0]
    return box["result"], interrupted


def _with_digest(location: str, digest: str) -> str:
    return f"{location}{'&' if '?' in location else '?'}digest={digest}"


class Uploads:
    """The blob uploads of one backend (its session: auth, retries, errors)."""

    def __init__(self, session: RegistrySession) -> None:
        self.session = session
        self.host = session.host

    def start(self, repo: str, blob: str | None = None) -> str:
        """A new upload session; with blob (a digest or a file's identity), kept for a re-run."""
        resp = self.session.request("POST", f"/v2/{repo}/blobs/uploads/", scope=push_scope(repo), ok=(202,))
        location = self.session.url(resp.headers["Location"])
        if blob is not None:
            resume.save(self._where(repo), blob, location)
        return location

    def _where(self, repo: str) -> str:
        return f"oci://{self.host}/{repo}"

    def resumable(self, repo: str, blob: str) -> tuple[str, int] | None:
        """The session an earlier run began for blob, and the bytes it holds, if the registry
        still has it (else its record is dropped)."""
        location = resume.load(self._where(repo), blob)
        if location is None:
            return None
        try:
            held = self.held(repo, location)
        except TrainopsError:  # unknown, or refused: start over
            held = None
        if held is None:
            resume.forget(self._where(repo), blob)
            return None
        return location, held

    def stream(self, repo: str, path: Path, size: int, blob: str, progress: Progress) -> str | None:
        """Send a large file into an upload session (the one an earlier run left for blob,
        from the offset it holds, else a new one); the session's location once it holds the
        whole file, to close with the digest. None on a failure the caller answers with the
        plain upload (the session is dropped). On Ctrl-C the body ends cleanly, the session
        is kept for the next run, and Cancelled (or KeyboardInterrupt) is raised."""
        scope, where = push_scope(repo), self._where(repo)
        found = self.resumable(repo, blob)
        location, offset = found if found is not None else (self.start(repo, blob), 0)
        if offset > size:  # not this file's bytes
            self._cancel(repo, location)
            location, offset = self.start(repo, blob), 0
        progress(offset)
        if offset == size:
            return location
        with path.open("rb") as fh:
            body = Upload(fh, offset, size - offset, progress, chunked=True)

            def patch() -> Response:
                return self.session.send("PATCH", location, scope=scope, headers=OCTETS, body=body)

            try:
                resp, interrupted = _ending(patch)
                resp.close()
            except TransportError:
                if interrupt.cancelled():
                    raise interrupt.Cancelled("the transfer was cancelled (Ctrl-C)") from None
                self._cancel(repo, location)
                resume.forget(where, blob)
                return None
        if resp.status_code in (202, 204) and (body.sent == size - offset or body.stopped):
            location = self.session.url(resp.headers.get("Location", location))
            resume.save(where, blob, location)  # the session at its new offset
            if interrupted:
                raise KeyboardInterrupt
            if body.stopped:
                raise interrupt.Cancelled("the transfer was cancelled (Ctrl-C)")
            return location
        self.session.reauthorize(scope, resp)  # a token that expired meanwhile: the next request has a new one
        self._cancel(repo, location)
        resume.forget(where, blob)
        if interrupted:
            raise KeyboardInterrupt
        # Refused, failed, or a registry that takes no chunked body (411): the plain upload
        # (one PUT with a length, retried) is tried, and its error is the one reported.
        return None

    def held(self, repo: str, location: str) -> int | None:
        """Bytes the registry holds for an upload session, or None to start a new session.

        Distribution reports an empty session and a one-byte one alike as ``Range: 0-0``;
        such a session holds nothing worth resuming, so it is None too (a new session, from
        byte 0, is right in both cases).
        """
        resp = self.session.request("GET", location, scope=push_scope(repo), ok=(204,), missing_ok=True)
        if resp.status_code == 404:
            return None
        try:
            end = int(resp.headers.get("Range", "").rpartition("-")[2])
        except ValueError:
            return None
        return end + 1 if end > 0 else None

    def upload(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        if source.path is not None and source.size >= INGEST_MIN:  # resumable by a later run
            location = self.stream(repo, source.path, source.size, source.digest, progress)
            if location is not None:
                try:
                    if self._close(repo, location, source.digest, source.size) is not None:
                        return
                finally:
                    resume.forget(self._where(repo), source.digest)
        location = self.start(repo)
        offset = 0
        backoff = Backoff(
            f"upload of {source.digest[:19]} to {self.host}/{repo}", policy=RetryPolicy(attempts=ATTEMPTS)
        )
        for attempt in range(1, ATTEMPTS + 1):
            try:
                self._send(repo, location, source, offset, progress)
                return
            except IntegrityError:
                # Distribution answers DIGEST_INVALID to the loser of two concurrent uploads of
                # one blob: if the blob is now there, whole, the upload has succeeded.
                if self.session.blob_size(repo, source.digest) == source.size:
                    return
                if attempt >= 2:
                    raise
                location, offset = self.start(repo), 0
            except _Retry as err:
                if self.session.blob_size(repo, source.digest) == source.size:
                    return
                if not backoff.wait(str(err) or "the upload was interrupted"):
                    raise RemoteError(f"uploading {source.digest[:19]} to {self.host} kept failing") from None
                held = self.held(repo, location)
                if held is None:  # the session was lost (e.g. a registry without a shared secret)
                    location, offset = self.start(repo), 0
                else:
                    offset = held
        raise RemoteError(f"uploading {source.digest[:19]} to {self.host} kept failing")

    def _send(self, repo: str, location: str, source: BlobSource, offset: int, progress: Progress) -> None:
        scope = push_scope(repo)
        with source.open() as fh:
            if offset:
                fh.seek(offset)
            body = Upload(fh, offset, source.size - offset, progress)
            try:
                if offset:  # resume: PATCH the rest, then close the session with its digest
                    headers = {**OCTETS, "Content-Range": f"{offset}-{source.size - 1}"}
                    resp = self.session.send("PATCH", location, scope=scope, headers=headers, body=body)
                    resp.close()
                    if resp.status_code not in (202, 204):
                        self._retry_or_raise("PATCH", repo, location, resp)
                    location = self.session.url(resp.headers.get("Location", location))
                    resp = self.session.send("PUT", _with_digest(location, source.digest), scope=scope, headers={})
                else:
                    resp = self.session.send(
                        "PUT", _with_digest(location, source.digest), scope=scope, headers=OCTETS, body=body
                    )
                resp.close()
            except TransportError as err:
                raise _Retry(str(err)) from None
        if resp.status_code == 201:
            return
        self._retry_or_raise("PUT", repo, location, resp)

    def _retry_or_raise(self, method: str, repo: str, location: str, resp: Response) -> None:
        if (
            resp.status_code in RETRY_STATUS
            or resp.status_code == 404
            or self.session.reauthorize(push_scope(repo), resp)
        ):
            raise _Retry(f"{method} answered {resp.status_code} {resp.reason}".rstrip())
        raise self.session.error(method, location, resp)

    def ingest(self, repo: str, path: Path, progress: Progress = no_progress) -> tuple[str, int, bool] | None:
        """Send a large file while hashing it, then close the session with the digest.

        Small files return None: the Store hashes them first, so a blob the registry already
        has is not sent again. Any transient failure also returns None, and the Store falls
        back to hashing first and the resumable upload.
        """
        size = path.stat().st_size
        if size < INGEST_MIN:
            return None
        blob = file_identity(path)
        hasher = FileHasher(path)  # the whole file: the digest covers what an earlier run sent too
        try:
            location = self.stream(repo, path, size, blob, progress)
        except BaseException:
            hasher.cancel()
            raise
        if location is None:
            hasher.cancel()
            return None
        found = "sha256:" + hasher.hexdigest()
        try:
            return self._close(repo, location, found, size)
        finally:
            resume.forget(self._where(repo), blob)

    def _close(self, repo: str, location: str, found: str, size: int) -> tuple[str, int, bool] | None:
        scope = push_scope(repo)
        try:
            resp = self.session.send("PUT", _with_digest(location, found), scope=scope, headers={})
            resp.close()
            if self.session.reauthorize(scope, resp):  # the token expired while the file was sent
                resp = self.session.send("PUT", _with_digest(location, found), scope=scope, headers={})
                resp.close()
        except TransportError:
            self._cancel(repo, location)
            return None
        if resp.status_code != 201:
            self._cancel(repo, location)
            if self.session.blob_size(repo, found) == size:  # a concurrent upload of the same blob won
                return found, size, False
            if resp.status_code in RETRY_STATUS or resp.status_code == 400:
                return None  # the Store hashes the file and takes the resumable path
            raise self.session.error("PUT", location, resp)
        return found, size, True

    def _cancel(self, repo: str, location: str) -> None:
        with contextlib.suppress(RemoteError, NotFoundError, IntegrityError, TransportError):
            self.session.send("DELETE", location, scope=push_scope(repo), headers={}).close()
