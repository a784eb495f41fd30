"""One registry's API calls: auth (Basic, Bearer per scope), retries and readable errors.

Every call of the oci:// backend goes through `RegistrySession.request`: it adds the
Authorization header (a Bearer token is renewed shortly before it expires, and on a 401),
retries 5xx, 429 and dropped connections with trainops.retry (honouring Retry-After), and
turns an error answer into a TrainopsError that names the tag, digest or repository.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any
from urllib.parse import urlencode, urljoin

from trainops.errors import IntegrityError, NotFoundError, RemoteError
from trainops.registry.backends.oci.auth import (
    Credentials,
    TokenCache,
    basic_header,
    fetch_token,
    load_credentials,
    parse_challenge,
)
from trainops.registry.backends.oci.http import (
    Response,
    TLSError,
    Transport,
    TransportError,
    UnknownHostError,
    Upload,
)
from trainops.registry.reference import DIGEST_RE
from trainops.retry import RETRY_STATUS, Backoff, RetryPolicy, retry_after_seconds

logger = logging.getLogger("trainops.registry.backends.oci")
ATTEMPTS = 6
_API_PATH = re.compile(r"^/v2/(.+?)/(manifests|blobs|tags)/([^/?]*)")


def pull_scope(repo: str) -> str:
    return f"repository:{repo}:pull"


def push_scope(repo: str) -> str:
    return f"repository:{repo}:pull,push"


class RegistrySession:
    """The API calls to one registry (base URL), shared by the threads of a backend."""

    def __init__(self, host: str, base: str) -> None:
        self.host, self.base = host, base
        self.transport = Transport()
        self._tokens = TokenCache()
        self._bearer: dict[str, str] | None = None  # the registry's Bearer challenge, once seen
        self._creds_loaded = False
        self._creds_value: Credentials | None = None

    def close(self) -> None:
        self.transport.close()

    @property
    def _creds(self) -> Credentials | None:
        """Docker's credentials for this registry, read when it first asks for them."""
        if not self._creds_loaded:
            self._creds_value = load_credentials(self.host)
            self._creds_loaded = True
        return self._creds_value

    def url(self, path: str) -> str:
        return path if path.startswith("http") else urljoin(self.base, path)

    # -- auth ------------------------------------------------------------------------------
    def authorize(self, resp: Response, scope: str) -> bool:
        """Answer a 401 challenge; True if a retry with credentials makes sense."""
        kind, challenge = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        if kind == "basic":
            if not self._creds or not self._creds.username:
                return False
            self._tokens.put("*", basic_header(self._creds))
            return True
        if kind == "bearer":
            self._bearer = challenge
            self._tokens.put(scope, fetch_token(self.transport, challenge, scope, self._creds, self.host))
            return True
        return False

    def header(self, scope: str) -> str | None:
        """The Authorization value for scope: cached while fresh, renewed before it expires."""
        value = self._tokens.get(scope)
        if value is None and self._bearer is not None:
            token = fetch_token(self.transport, self._bearer, scope, self._creds, self.host)
            self._tokens.put(scope, token)
            value = token.header
        return value

    def with_auth(self, scope: str, headers: dict[str, str]) -> dict[str, str]:
        token = self.header(scope)
        return {**headers, "Authorization": token} if token else headers

    def reauthorize(self, scope: str, resp: Response) -> bool:
        """A 401 in the middle of a transfer: the token expired; fetch a new one.

        True when a new credential was obtained, so the request is worth repeating (an
        upload resumes at the offset the registry holds, a download where it broke off).
        """
        if resp.status_code != 401:
            return False
        self._tokens.drop(scope)
        logger.warning("%s refused the token during a transfer (expired); fetching a new one", self.host)
        return self.authorize(resp, scope)

    # -- calls -----------------------------------------------------------------------------
    def send(self, method: str, url: str, *, scope: str, headers: dict[str, str], body: Any = None) -> Response:
        """One request with the scope's credentials and no retry (transfers retry themselves)."""
        return self.transport.request(method, url, headers=self.with_auth(scope, headers), body=body)

    def request(
        self,
        method: str,
        path: str,
        *,
        scope: str,
        ok: tuple[int, ...],
        headers: dict[str, str] | None = None,
        body: bytes | Upload | None = None,
        stream: bool = False,
        params: dict[str, str] | None = None,
        missing_ok: bool = False,
    ) -> Response:
        """One API call with auth, retries on transient failures, and readable errors.
        Unless stream is set, the body is read (and the connection free) on return."""
        url = self.url(path)
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        backoff = Backoff(f"{method} {shown(url)}", policy=RetryPolicy(attempts=ATTEMPTS))
        authorized_once = False
        while True:
            try:
                resp = self.transport.request(
                    method, url, headers=self.with_auth(scope, dict(headers or {})), body=body
                )
                if not stream:
                    resp.content  # noqa: B018 - read the body, free the connection
            except TLSError as err:
                raise RemoteError(
                    f"TLS with {self.host} failed ({short(err)})",
                    hint=(
                        "if it serves plain HTTP, mark it insecure with --insecure, spec.insecureRegistries "
                        f"or TRAINOPS_INSECURE_REGISTRIES={self.host}; for a private CA set REQUESTS_CA_BUNDLE"
                    ),
                ) from None
            except TransportError as err:
                if isinstance(err, UnknownHostError) or not backoff.wait(str(err)):
                    raise RemoteError(
                        f"cannot reach registry {self.host}: {short(err)}",
                        hint="check that it runs and the host:port is right",
                    ) from None
                continue
            if resp.status_code == 401 and not authorized_once and self.authorize(resp, scope):
                authorized_once = True
                resp.close()
                continue
            if resp.status_code in ok:
                return resp
            resp.close()
            if resp.status_code in RETRY_STATUS:
                why = f"{resp.status_code} {resp.reason}".rstrip()
                if backoff.wait(why, retry_after=retry_after_seconds(resp.headers.get("Retry-After"))):
                    continue
            if resp.status_code == 404 and missing_ok:
                return resp
            raise self.error(method, path, resp)

    def blob_size(self, repo: str, digest: str) -> int | None:
        """The size of a blob in repo, or None if it has none by that digest."""
        resp = self.request("HEAD", f"/v2/{repo}/blobs/{digest}", scope=pull_scope(repo), ok=(200,), missing_ok=True)
        if resp.status_code == 404:
            return None
        return int(resp.headers.get("Content-Length", "0"))

    # -- errors ----------------------------------------------------------------------------
    def error(self, method: str, path: str, resp: Response) -> Exception:
        code, message = "", resp.reason
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError, AttributeError, TransportError):
            first = resp.json()["errors"][0]
            code, message = first.get("code", ""), first.get("message", message)
        where = f"{self.host}{path if path.startswith('/') else ''}"
        if resp.status_code in (401, 403):
            return RemoteError(
                f"{self.host} refused access ({resp.status_code} {code or message})",
                hint=f"run `docker login {self.host}` (trainops reads Docker's config.json)",
            )
        if resp.status_code == 404:
            return self.not_found(path, code or message)
        if code in ("DIGEST_INVALID", "SIZE_INVALID", "BLOB_UPLOAD_INVALID"):
            return IntegrityError(f"{self.host} rejected the content: {message}")
        return RemoteError(f"{method} {shown(where)} failed: {resp.status_code} {code} {message}".rstrip())

    def not_found(self, path: str, code: str) -> NotFoundError:
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


def shown(url: str) -> str:
    """A URL for messages: without the query (upload session state, digests)."""
    return url.split("?", 1)[0]


def short(err: BaseException) -> str:
    text = str(err)
    return text if len(text) < 160 else text[:157] + "..."
