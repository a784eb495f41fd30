"""oci:// backend: the OCI Distribution API (Distribution, Harbor, ECR, …) over requests.

- TLS unless the registry is marked insecure; CA bundles via REQUESTS_CA_BUNDLE/SSL_CERT_FILE.
- Credentials from Docker's config.json; Basic and Bearer (token per scope) challenges.
- Uploads stream the file in one PUT (the registry verifies the digest); a dropped upload
  resumes from the offset the registry reports, a lost session starts over; 5xx, 429 and
  dropped connections are retried with exponential backoff.
- Downloads stream to disk while hashing, resume with Range, and are verified.
- Referrers: the OCI 1.1 API where the registry has it, else the referrers tag schema
  (`sha256-<hex>` → an image index), which trainops maintains on put_manifest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urljoin

import requests
from requests.adapters import HTTPAdapter

from trainops.errors import IntegrityError, NotFoundError, RemoteError
from trainops.registry import media
from trainops.registry.backends.base import (
    Backend,
    BackgroundHash,
    BlobSource,
    Descriptor,
    DigestWriter,
    ManifestData,
    Progress,
    no_progress,
    sha256_digest,
)
from trainops.registry.backends.oci_auth import (
    HUB_API,
    Credentials,
    TokenCache,
    basic_header,
    fetch_token,
    is_docker_hub,
    load_credentials,
    parse_challenge,
)
from trainops.registry.reference import DIGEST_RE, RegistryRoot
from trainops.retry import RETRY_STATUS, Backoff, RetryPolicy, retry_after_seconds

logger = logging.getLogger(__name__)
ACCEPT = ", ".join(media.MANIFEST_TYPES)
ATTEMPTS = 6
INGEST_MIN = 32 * 1024 * 1024  # files from this size are sent while they are hashed
CHUNK = 1024 * 1024


_API_PATH = re.compile(r"^/v2/(.+?)/(manifests|blobs|tags)/([^/?]*)")
_RACE = RetryPolicy(attempts=ATTEMPTS, base=0.1, jitter=1.0)  # writers that collided: spread them apart


class _Retry(Exception):
    """A transient failure worth another attempt."""


class _Body:
    """A streaming request body: 1 MiB chunks, counted (and optionally hashed) as sent.

    It has __len__ (so requests sends Content-Length) and __iter__ but no read(): given
    a file-like object, http.client would send it in 8 KiB reads.
    """

    def __init__(self, fh: BinaryIO, length: int, progress: Progress, digest: Any = None) -> None:
        self.fh, self.length, self.progress, self.digest = fh, length, progress, digest
        self.sent = 0

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        while self.sent < self.length:
            chunk = self.fh.read(min(CHUNK, self.length - self.sent))
            if not chunk:
                return
            if self.digest is not None:
                self.digest.update(chunk)
            self.sent += len(chunk)
            self.progress(len(chunk))
            yield chunk


class OCIBackend(Backend):
    scheme = "oci"

    def __init__(self, root: RegistryRoot, *, insecure: bool = False) -> None:
        super().__init__(root)
        self.host = root.location
        api = HUB_API if self.host.endswith("docker.io") and is_docker_hub(self.host) else self.host
        self.base = f"{'http' if insecure else 'https'}://{api}"
        self.insecure = insecure
        self._local = threading.local()
        self._tokens = TokenCache()
        self._bearer: dict[str, str] | None = None  # the registry's Bearer challenge, once seen
        self._creds_loaded = False
        self._creds_value: Credentials | None = None
        self._sessions: list[requests.Session] = []
        # `?n=` of tags/list: None lets the registry choose (Distribution then answers every
        # tag at once, reading its tag directory once rather than once per page); a page it
        # cuts short is followed through its Link header either way.
        self.page_size: int | None = None
        self.catalog_page_size = 1000  # _catalog: Distribution's default page is only 100
        self._lock = threading.Lock()

    # -- HTTP plumbing -------------------------------------------------------------------
    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=16)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            session.headers["User-Agent"] = "trainops"
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def close(self) -> None:
        with self._lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()

    @property
    def _creds(self) -> Credentials | None:
        """Docker's credentials for this registry, read when it first asks for them."""
        if not self._creds_loaded:
            self._creds_value = load_credentials(self.host)
            self._creds_loaded = True
        return self._creds_value

    def _url(self, path: str) -> str:
        return path if path.startswith("http") else urljoin(self.base, path)

    def _authorize(self, resp: requests.Response, scope: str) -> bool:
        """Answer a 401 challenge; True if a retry with credentials makes sense."""
        header = resp.headers.get("WWW-Authenticate", "")
        kind, challenge = parse_challenge(header)
        if kind == "basic":
            if not self._creds or not self._creds.username:
                return False
            self._tokens.put("*", basic_header(self._creds))
            return True
        if kind == "bearer":
            self._bearer = challenge
            self._tokens.put(scope, fetch_token(self._session(), challenge, scope, self._creds, self.host))
            return True
        return False

    def _header(self, scope: str) -> str | None:
        """The Authorization value for scope: cached while fresh, renewed before it expires."""
        value = self._tokens.get(scope)
        if value is None and self._bearer is not None:
            token = fetch_token(self._session(), self._bearer, scope, self._creds, self.host)
            self._tokens.put(scope, token)
            value = token.header
        return value

    def _request(
        self,
        method: str,
        path: str,
        *,
        scope: str,
        ok: tuple[int, ...],
        headers: dict[str, str] | None = None,
        body: Callable[[], Any] | None = None,
        stream: bool = False,
        params: dict[str, str] | None = None,
        missing_ok: bool = False,
    ) -> requests.Response:
        """One API call with auth, retries on transient failures, and readable errors.

        body is a callable so that every attempt gets a fresh (rewound) body.
        """
        url = self._url(path)
        backoff = Backoff(f"{method} {self._shown(url)}", policy=RetryPolicy(attempts=ATTEMPTS))
        authorized_once = False
        while True:
            all_headers = dict(headers or {})
            auth = self._header(scope)
            if auth:
                all_headers["Authorization"] = auth
            try:
                resp = self._session().request(
                    method,
                    url,
                    headers=all_headers,
                    data=body() if body else None,
                    stream=stream,
                    params=params,
                    timeout=(30, 300),
                )
            except requests.exceptions.SSLError as err:
                raise RemoteError(
                    f"TLS with {self.host} failed ({_short(err)})",
                    hint=(
                        "if it serves plain HTTP, mark it insecure with --insecure, spec.insecureRegistries "
                        f"or TRAINOPS_INSECURE_REGISTRIES={self.host}; for a private CA set REQUESTS_CA_BUNDLE"
                    ),
                ) from None
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
                if not backoff.wait(_reason(err)):
                    raise RemoteError(
                        f"cannot reach registry {self.host}: {_short(err)}",
                        hint="check that it runs and the host:port is right",
                    ) from None
                continue
            if resp.status_code == 401 and not authorized_once and self._authorize(resp, scope):
                authorized_once = True
                resp.close()
                continue
            if resp.status_code in ok:
                return resp
            if resp.status_code in RETRY_STATUS:
                resp.close()
                why = f"{resp.status_code} {resp.reason}".rstrip()
                if backoff.wait(why, retry_after=retry_after_seconds(resp.headers.get("Retry-After"))):
                    continue
            if resp.status_code == 404 and missing_ok:
                return resp
            raise self._error(method, path, resp)

    def _shown(self, url: str) -> str:
        """A URL for messages: without the query (upload session state, digests)."""
        return url.split("?", 1)[0]

    def _error(self, method: str, path: str, resp: requests.Response) -> Exception:
        code, message = "", resp.reason
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
            first = resp.json()["errors"][0]
            code, message = first.get("code", ""), first.get("message", message)
        where = f"{self.host}{path if path.startswith('/') else ''}"
        if resp.status_code in (401, 403):
            return RemoteError(
                f"{self.host} refused access ({resp.status_code} {code or message})",
                hint=f"run `docker login {self.host}` (trainops reads Docker's config.json)",
            )
        if resp.status_code == 404:
            return self._not_found(path, code or message)
        if code in ("DIGEST_INVALID", "SIZE_INVALID", "BLOB_UPLOAD_INVALID"):
            return IntegrityError(f"{self.host} rejected the content: {message}")
        return RemoteError(f"{method} {where} failed: {resp.status_code} {code} {message}".rstrip())

    def _not_found(self, path: str, code: str) -> NotFoundError:
        """A 404 in user terms: which tag, digest or repository, and what to run next."""
        match = _API_PATH.match(path)
        if match is None:
            return NotFoundError(f"not found on {self.host}{path if path.startswith('/') else ''} ({code})")
        repo, what, target = match.groups()
        url = f"oci://{self.host}/{repo}"
        if code == "NAME_UNKNOWN" or (what == "tags" and code != "MANIFEST_UNKNOWN"):
            return NotFoundError(
                f"no repository {repo} on {self.host}",
                hint=f"check the name (`trainops registry ls oci://{self.host}` lists them), or push to it first",
            )
        if what == "blobs":
            return NotFoundError(f"blob {target[:19]} is missing from {url}", hint="push the artifact again")
        listing = f"`trainops registry ls {url}` lists its tags"
        if DIGEST_RE.match(target):
            return NotFoundError(f"no manifest {target[:19]} in {url}", hint=listing)
        return NotFoundError(f"no tag {target!r} in {url}", hint=listing)

    @staticmethod
    def _pull(repo: str) -> str:
        return f"repository:{repo}:pull"

    @staticmethod
    def _push(repo: str) -> str:
        return f"repository:{repo}:pull,push"

    # -- blobs -----------------------------------------------------------------------------
    def blob_size(self, repo: str, digest: str) -> int | None:
        resp = self._request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=self._pull(repo), ok=(200,), missing_ok=True)
        if resp.status_code == 404:
            return None
        return int(resp.headers.get("Content-Length", "0"))

    def _start_upload(self, repo: str) -> str:
        resp = self._request("POST", f"/v2/{repo}/blobs/uploads/", scope=self._push(repo), ok=(202,))
        return self._url(resp.headers["Location"])

    def _upload_offset(self, repo: str, location: str) -> int | None:
        """Bytes the registry holds for an upload session, or None to start a new session.

        Distribution reports an empty session and a one-byte one alike as ``Range: 0-0``;
        such a session holds nothing worth resuming, so it is None too (a new session, from
        byte 0, is right in both cases).
        """
        resp = self._request("GET", location, scope=self._push(repo), ok=(204,), missing_ok=True)
        if resp.status_code == 404:
            return None
        held = resp.headers.get("Range", "")
        try:
            end = int(held.rpartition("-")[2])
        except ValueError:
            return None
        return end + 1 if end > 0 else None

    def upload_blob(self, repo: str, source: BlobSource, progress: Progress = no_progress) -> None:
        location = self._start_upload(repo)
        offset = 0
        what = f"upload of {source.digest[:19]} to {self.host}/{repo}"
        backoff = Backoff(what, policy=RetryPolicy(attempts=ATTEMPTS))
        for attempt in range(1, ATTEMPTS + 1):
            try:
                self._send(repo, location, source, offset, progress)
                return
            except IntegrityError:
                # Distribution answers DIGEST_INVALID to the loser of two concurrent uploads of
                # one blob: if the blob is now there, whole, the upload has succeeded.
                if self.blob_size(repo, source.digest) == source.size:
                    return
                if attempt >= 2:
                    raise
                location, offset = self._start_upload(repo), 0
            except _Retry as err:
                if self.blob_size(repo, source.digest) == source.size:
                    return
                if not backoff.wait(str(err) or "the upload was interrupted"):
                    raise RemoteError(f"uploading {source.digest[:19]} to {self.host} kept failing") from None
                held = self._upload_offset(repo, location)
                if held is None:  # the session was lost (e.g. a registry without a shared secret)
                    location, offset = self._start_upload(repo), 0
                else:
                    offset = held
        raise RemoteError(f"uploading {source.digest[:19]} to {self.host} kept failing")

    def ingest_file(self, repo: str, path: Path, progress: Progress = no_progress) -> tuple[str, int, bool] | None:
        """Send a large file while hashing it (one read), then close the session with the digest.

        Small files return None: the Store hashes them first, so a blob the registry already
        has is not sent again. Any transient failure also returns None, and the Store falls
        back to hashing first and the resumable upload.
        """
        size = path.stat().st_size
        if size < INGEST_MIN:
            return None
        location = self._start_upload(repo)
        digest = BackgroundHash()
        with path.open("rb") as fh:
            body = _Body(fh, size, progress, digest)
            headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
            try:
                resp = self._session().patch(location, data=body, headers=self._auth(repo, headers), timeout=(30, 600))
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
                self._cancel(repo, location)
                return None
        if resp.status_code not in (202, 204) or body.sent != size:
            refused = self._reauthorize(repo, resp)
            self._cancel(repo, location)
            if refused or resp.status_code in RETRY_STATUS or resp.status_code in (202, 204):
                return None
            raise self._error("PATCH", location, resp)
        location = self._url(resp.headers.get("Location", location))
        found = "sha256:" + digest.hexdigest()
        sep = "&" if "?" in location else "?"

        def close() -> requests.Response:
            headers = self._auth(repo, {"Content-Length": "0"})
            return self._session().put(f"{location}{sep}digest={found}", headers=headers, timeout=(30, 300))

        resp = close()
        if self._reauthorize(repo, resp):  # the token expired while the file was sent
            resp = close()
        if resp.status_code != 201:
            self._cancel(repo, location)
            if self.blob_size(repo, found) == size:  # a concurrent upload of the same blob won
                return found, size, False
            if resp.status_code in RETRY_STATUS or resp.status_code == 400:
                return None  # the Store hashes the file and takes the resumable path
            raise self._error("PUT", location, resp)
        return found, size, True

    def _cancel(self, repo: str, location: str) -> None:
        with contextlib.suppress(RemoteError, NotFoundError, IntegrityError, requests.RequestException):
            self._session().delete(location, headers=self._auth(repo, {}), timeout=30)

    def _send(self, repo: str, location: str, source: BlobSource, offset: int, progress: Progress) -> None:
        sep = "&" if "?" in location else "?"
        with source.open() as fh:
            fh.seek(offset)
            remaining = source.size - offset
            reader = _Body(fh, remaining, progress)
            headers = {"Content-Type": "application/octet-stream", "Content-Length": str(remaining)}
            if offset:
                headers["Content-Range"] = f"{offset}-{source.size - 1}"
            try:
                if offset:  # resume: PATCH the rest, then close the session with its digest
                    resp = self._session().patch(
                        location, data=reader, headers=self._auth(repo, headers), timeout=(30, 600)
                    )
                    if resp.status_code not in (202, 204):
                        self._retry_or_raise("PATCH", repo, location, resp)
                    location = self._url(resp.headers.get("Location", location))
                    sep = "&" if "?" in location else "?"
                    resp = self._session().put(
                        f"{location}{sep}digest={source.digest}",
                        headers=self._auth(repo, {"Content-Length": "0"}),
                        timeout=(30, 300),
                    )
                else:
                    resp = self._session().put(
                        f"{location}{sep}digest={source.digest}",
                        data=reader,
                        headers=self._auth(repo, headers),
                        timeout=(30, 600),
                    )
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as err:
                raise _Retry(_reason(err)) from None
        if resp.status_code == 201:
            return
        self._retry_or_raise("PUT", repo, location, resp)

    def _retry_or_raise(self, method: str, repo: str, location: str, resp: requests.Response) -> None:
        if resp.status_code in RETRY_STATUS or resp.status_code == 404 or self._reauthorize(repo, resp):
            raise _Retry(f"{method} answered {resp.status_code} {resp.reason}".rstrip())
        raise self._error(method, location, resp)

    def _reauthorize(self, repo: str, resp: requests.Response) -> bool:
        """A 401 on an upload request: the token expired mid-transfer; fetch a new one.

        True when a new credential was obtained, so the request is worth repeating (the
        upload resumes at the offset the registry holds).
        """
        if resp.status_code != 401:
            return False
        scope = self._push(repo)
        self._tokens.drop(scope)
        logger.warning("%s refused the token during an upload to %s (expired); fetching a new one", self.host, repo)
        return self._authorize(resp, scope)

    def _auth(self, repo: str, headers: dict[str, str]) -> dict[str, str]:
        token = self._header(self._push(repo))
        return {**headers, "Authorization": token} if token else headers

    def download_blob(self, repo: str, digest: str, dest: Path, progress: Progress = no_progress) -> None:
        try:
            with dest.open("wb") as out:
                writer = DigestWriter(out, digest, None)
                backoff = Backoff(f"download of {digest[:19]} from {self.host}/{repo}")
                for _attempt in range(1, ATTEMPTS + 1):
                    headers = {"Range": f"bytes={writer.written}-"} if writer.written else {}
                    resp = self._request(
                        "GET",
                        f"/v2/{repo}/blobs/{digest}",
                        scope=self._pull(repo),
                        ok=(200, 206),
                        headers=headers,
                        stream=True,
                    )
                    if writer.written and resp.status_code == 200:  # no Range support: start over
                        out.seek(0)
                        out.truncate()
                        writer = DigestWriter(out, digest, None)
                    try:
                        for chunk in resp.iter_content(CHUNK):
                            writer.write(chunk)
                            progress(len(chunk))
                        break
                    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as err:
                        if not backoff.wait(f"the download broke off after {writer.written} bytes: {_reason(err)}"):
                            raise RemoteError(f"downloading {digest[:19]} from {self.host} kept failing") from None
                    finally:
                        resp.close()
            writer.verify(f"blob {digest[:19]} from {self.host}/{repo}")
        except BaseException:
            dest.unlink(missing_ok=True)
            raise

    def open_blob(self, repo: str, digest: str) -> AbstractContextManager[BinaryIO]:
        resp = self._request("GET", f"/v2/{repo}/blobs/{digest}", scope=self._pull(repo), ok=(200,), stream=True)
        resp.raw.decode_content = True

        @contextlib.contextmanager
        def body() -> Iterator[BinaryIO]:
            try:
                yield resp.raw
            finally:
                resp.close()

        return body()

    def read_range(self, repo: str, digest: str, offset: int, length: int) -> bytes:
        """An HTTP Range GET. A 206 must carry a Content-Range that starts at offset; a
        registry that ignores Range (200) is read only up to offset + length, and said so."""
        import logging
        import re

        from trainops.registry.backends.base import check_range, read_exact, read_span

        check_range(offset, length)
        if length == 0:
            return b""
        resp = self._request(
            "GET",
            f"/v2/{repo}/blobs/{digest}",
            scope=self._pull(repo),
            ok=(200, 206, 416),
            headers={"Range": f"bytes={offset}-{offset + length - 1}", "Accept-Encoding": "identity"},
            stream=True,
        )
        with contextlib.closing(resp):
            if resp.status_code == 416:  # offset at or past the end
                return b""
            if resp.status_code == 200:
                logging.getLogger(__name__).warning(
                    "%s ignored the Range request for %s; reading its first %d bytes",
                    self.host,
                    digest,
                    offset + length,
                )
                return read_span(resp.raw, offset, length)
            found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", resp.headers.get("Content-Range", "").strip())
            if not found or int(found[1]) != offset or int(found[2]) > offset + length - 1:
                raise RemoteError(
                    f"{self.host} answered a Range request for {digest} with Content-Range "
                    f"{resp.headers.get('Content-Range')!r}, not bytes {offset}-{offset + length - 1}",
                    hint="the registry or a proxy in front of it mishandles Range requests",
                )
            return read_exact(resp.raw, int(found[2]) - offset + 1)

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        resp = self._request(
            "POST",
            f"/v2/{repo}/blobs/uploads/",
            scope=self._push(repo),
            ok=(201, 202),
            params={"mount": digest, "from": from_repo},
        )
        if resp.status_code == 201:
            return True
        location = resp.headers.get("Location")
        if location:
            with contextlib.suppress(RemoteError, NotFoundError):
                self._request("DELETE", location, scope=self._push(repo), ok=(204, 202, 200), missing_ok=True)
        return False

    def delete_blob(self, repo: str, digest: str) -> None:
        self._request("DELETE", f"/v2/{repo}/blobs/{digest}", scope=self._push(repo), ok=(202, 200), missing_ok=True)

    def list_blobs(self, repo: str) -> list[str] | None:
        return None  # the Distribution API cannot list blobs; the registry's own gc reclaims them

    # -- manifests and tags ------------------------------------------------------------
    def put_manifest(self, repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        if sha256_digest(manifest.data) != manifest.digest:
            raise IntegrityError(f"manifest bytes do not match {manifest.digest}")
        headers = {"Content-Type": manifest.media_type}
        backoff = Backoff(f"PUT manifest {manifest.digest[:19]} to {self.host}/{repo}", policy=_RACE)
        while True:
            try:
                resp = self._request(
                    "PUT",
                    f"/v2/{repo}/manifests/{tag or manifest.digest}",
                    scope=self._push(repo),
                    ok=(201,),
                    headers=headers,
                    body=lambda: manifest.data,
                )
                break
            except IntegrityError:
                # Distribution answers DIGEST_INVALID when another writer stores the same
                # manifest bytes at the same moment (under another tag, say); the bytes were
                # checked above, so the PUT is sent again once that writer is done.
                if not backoff.wait("another writer stored the same manifest at that moment"):
                    raise
        parsed = json.loads(manifest.data)
        subject = parsed.get("subject")
        if subject and "OCI-Subject" not in resp.headers:
            self._add_referrer(repo, subject["digest"], manifest, parsed)

    def _referrers_tag(self, digest: str) -> str:
        return "sha256-" + digest.split(":", 1)[1]

    def _add_referrer(self, repo: str, subject: str, manifest: ManifestData, parsed: dict[str, Any]) -> None:
        """Maintain the referrers tag schema index for registries without the referrers API."""
        entry = Descriptor(
            media_type=manifest.media_type,
            digest=manifest.digest,
            size=len(manifest.data),
            annotations=dict(parsed.get("annotations") or {}),
            artifact_type=parsed.get("artifactType") or (parsed.get("config") or {}).get("mediaType"),
        ).as_oci()
        tag = self._referrers_tag(subject)
        for _ in range(5):
            try:
                current = json.loads(self.get_manifest(repo, tag).data)
            except NotFoundError:
                current = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": []}
            entries = [m for m in current.get("manifests", []) if m.get("digest") != manifest.digest]
            entries.append(entry)
            entries.sort(key=lambda m: m["digest"])
            body = json.dumps({**current, "manifests": entries}, sort_keys=True).encode()
            self._request(
                "PUT",
                f"/v2/{repo}/manifests/{tag}",
                scope=self._push(repo),
                ok=(201,),
                headers={"Content-Type": media.OCI_INDEX},
                body=lambda body=body: body,  # type: ignore[misc]
            )
            # another writer may have replaced the index meanwhile: check ours is in it
            stored = json.loads(self.get_manifest(repo, tag).data)
            if any(m.get("digest") == manifest.digest for m in stored.get("manifests", [])):
                return
        raise RemoteError(f"could not record the referrer {manifest.digest[:19]} on {self.host}/{repo}")

    def get_manifest(self, repo: str, reference: str) -> ManifestData:
        resp = self._request(
            "GET",
            f"/v2/{repo}/manifests/{reference}",
            scope=self._pull(repo),
            ok=(200,),
            headers={"Accept": ACCEPT},
        )
        data = resp.content
        digest = sha256_digest(data)
        if DIGEST_RE.match(reference) and digest != reference:
            raise IntegrityError(f"{self.host}/{repo}: manifest {reference} arrived with digest {digest}")
        claimed = resp.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise IntegrityError(f"{self.host}/{repo}:{reference}: registry says {claimed}, content hashes to {digest}")
        media_type = resp.headers.get("Content-Type", "").split(";")[0] or str(json.loads(data).get("mediaType", ""))
        return ManifestData(data=data, media_type=media_type, digest=digest)

    def _paged(self, path: str, key: str, scope: str, page_size: int | None) -> list[str]:
        items: list[str] = []
        url: str | None = path
        params: dict[str, str] | None = {"n": str(page_size)} if page_size else None
        while url:
            resp = self._request("GET", url, scope=scope, ok=(200,), params=params)
            items.extend(resp.json().get(key) or [])
            link = resp.headers.get("Link", "")
            url = link.split(";")[0].strip("<> ") if 'rel="next"' in link else None
            params = None  # the next link carries them
        return items

    def list_tags(self, repo: str) -> list[str]:
        try:
            tags = self._paged(f"/v2/{repo}/tags/list", "tags", self._pull(repo), self.page_size)
        except NotFoundError:
            raise NotFoundError(
                f"no repository {repo} on {self.host}", hint="check the reference, or push to it first"
            ) from None
        return sorted(t for t in tags if not _is_referrers_tag(t))

    def _resolve_digest(self, repo: str, tag: str) -> str | None:
        resp = self._request(
            "HEAD",
            f"/v2/{repo}/manifests/{tag}",
            scope=self._pull(repo),
            ok=(200,),
            headers={"Accept": ACCEPT},
            missing_ok=True,
        )
        return None if resp.status_code == 404 else resp.headers.get("Docker-Content-Digest")

    def delete_tag(self, repo: str, tag: str) -> None:
        """Remove a tag. OCI registries do it with DELETE by tag; Distribution 2.8 cannot
        (it answers DIGEST_INVALID), so there the manifest itself is deleted — refused when
        another tag still names it, since that would remove the other tag too."""
        digest = self._resolve_digest(repo, tag)
        if digest is None:
            raise NotFoundError(f"no tag {tag!r} in {self.host}/{repo}")
        try:
            self._request("DELETE", f"/v2/{repo}/manifests/{tag}", scope=self._push(repo), ok=(202, 200))
            return
        except (RemoteError, IntegrityError):
            pass  # no tag deletion here: fall back to deleting the manifest
        others = [t for t in self.list_tags(repo) if t != tag and self._resolve_digest(repo, t) == digest]
        if others:
            raise RemoteError(
                f"{self.host} cannot remove tag {tag!r} alone: it deletes manifests, "
                f"and {others[0]!r} names the same one",
                hint="remove the other tags too, or leave this one",
            )
        self.delete_manifest(repo, digest)

    def delete_manifest(self, repo: str, digest: str) -> None:
        self._request("DELETE", f"/v2/{repo}/manifests/{digest}", scope=self._push(repo), ok=(202, 200))

    def list_manifests(self, repo: str) -> list[str]:
        digests: set[str] = set()
        for tag in self._paged(f"/v2/{repo}/tags/list", "tags", self._pull(repo), self.page_size):
            found = self._resolve_digest(repo, tag)
            if not found:
                continue
            if _is_referrers_tag(tag):
                index = json.loads(self.get_manifest(repo, tag).data)
                digests.update(m["digest"] for m in index.get("manifests", []))
            else:
                digests.add(found)
        return sorted(digests)

    def list_repositories(self) -> list[str]:
        repos = self._paged("/v2/_catalog", "repositories", "registry:catalog:*", self.catalog_page_size)
        prefix = self.root.prefix.strip("/")
        return sorted(r for r in repos if not prefix or r == prefix or r.startswith(prefix + "/"))

    def referrers(self, repo: str, digest: str) -> list[Descriptor]:
        resp = self._request(
            "GET",
            f"/v2/{repo}/referrers/{digest}",
            scope=self._pull(repo),
            ok=(200,),
            missing_ok=True,
            headers={"Accept": media.OCI_INDEX},
        )
        if resp.status_code == 200 and resp.headers.get("Content-Type", "").startswith(media.OCI_INDEX):
            entries = resp.json().get("manifests", [])
        else:
            try:
                entries = json.loads(self.get_manifest(repo, self._referrers_tag(digest)).data).get("manifests", [])
            except NotFoundError:
                entries = []
        unique = {e["digest"]: Descriptor.from_oci(e) for e in entries}
        return [unique[k] for k in sorted(unique)]


def _is_referrers_tag(tag: str) -> bool:
    return tag.startswith("sha256-") and len(tag) == 71


def _reason(err: BaseException) -> str:
    """Why a connection failed, in a few words (requests nests the cause deep in its text)."""
    text = str(err)
    for known in ("Connection refused", "timed out", "Name or service not known", "Connection reset"):
        if known.lower() in text.lower():
            return known.lower()
    return type(err).__name__


def _short(err: BaseException) -> str:
    text = str(err)
    return text if len(text) < 160 else text[:157] + "..."
