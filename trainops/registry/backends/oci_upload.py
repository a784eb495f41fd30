"""Blob uploads of the oci:// backend.

- A blob whose digest is known goes in one PUT (the registry verifies the digest); a
  dropped upload resumes from the offset the registry reports, a lost session starts over.
- A large file whose digest is not known yet (a cold digest cache) is sent in one PATCH
  while a second thread hashes it (both read the same pages of the page cache), then the
  session is closed with a PUT of the digest: one pass over the file, not two.
- On plain HTTP the bytes go with sendfile (no copy through Python); on TLS, 8 MiB reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path

from trainops.errors import IntegrityError, NotFoundError, RemoteError
from trainops.registry.backends.base import BlobSource, Progress, no_progress
from trainops.registry.backends.oci_http import Response, TransportError, Upload
from trainops.registry.backends.oci_session import ATTEMPTS, RegistrySession, push_scope
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


def _with_digest(location: str, digest: str) -> str:
    return f"{location}{'&' if '?' in location else '?'}digest={digest}"


class Uploads:
    """The blob uploads of one backend (its session: auth, retries, errors)."""

    def __init__(self, session: RegistrySession) -> None:
        self.session = session
        self.host = session.host

    def start(self, repo: str) -> str:
        resp = self.session.request("POST", f"/v2/{repo}/blobs/uploads/", scope=push_scope(repo), ok=(202,))
        return self.session.url(resp.headers["Location"])

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
        scope = push_scope(repo)
        location = self.start(repo)
        hasher = FileHasher(path)
        with path.open("rb") as fh:
            body = Upload(fh, 0, size, progress)
            try:
                resp = self.session.send("PATCH", location, scope=scope, headers=OCTETS, body=body)
                resp.close()
            except TransportError:
                hasher.cancel()
                self._cancel(repo, location)
                return None
        if resp.status_code not in (202, 204) or body.sent != size:
            hasher.cancel()
            refused = self.session.reauthorize(scope, resp)
            self._cancel(repo, location)
            if refused or resp.status_code in RETRY_STATUS or resp.status_code in (202, 204):
                return None
            raise self.session.error("PATCH", location, resp)
        location = self.session.url(resp.headers.get("Location", location))
        found = "sha256:" + hasher.hexdigest()
        return self._close(repo, location, found, size)

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
