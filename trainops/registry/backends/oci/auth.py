"""Registry credentials from Docker's config.json, and the Basic/Bearer token dance.

Credentials come from `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`),
resolved by docker-py exactly as Docker resolves them: `auths.<host>` (auth or
identitytoken), the `credHelpers`/`credsStore` helpers, Docker Hub under its index key.
They are never logged or put into an error message.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from trainops.errors import RemoteError
from trainops.registry.backends.oci.http import Transport, TransportError

_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Credentials:
    username: str | None = None
    password: str | None = None
    identity_token: str | None = None

    def __repr__(self) -> str:  # never show secrets
        return f"Credentials(username={self.username!r}, secret=***)"


def docker_config_path() -> Path:
    base = os.environ.get("DOCKER_CONFIG")
    return Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"


HUB_API = "registry-1.docker.io"  # where Docker Hub's Distribution API is served


def is_docker_hub(host: str) -> bool:
    """docker.io and index.docker.io name Docker Hub, as docker-py resolves index names."""
    from docker.auth import INDEX_NAME, resolve_index_name  # lazy: loads docker

    return host == HUB_API or resolve_index_name(host) == INDEX_NAME


def load_credentials(host: str) -> Credentials | None:
    """Credentials for host (host[:port]) from Docker's config, or None.

    docker-py's own resolution (`docker.auth.load_config` and `resolve_authconfig`): the
    `auths` entries (legacy URL keys included; Docker Hub's is https://index.docker.io/v1/),
    `credHelpers` and `credsStore`. Loaded only when a registry asks for credentials.
    """
    from docker.auth import INDEX_NAME, load_config  # lazy: loads docker
    from docker.errors import DockerException  # lazy: loads docker

    path = docker_config_path()
    if not path.is_file():
        return None
    registry = INDEX_NAME if is_docker_hub(host) else host
    try:
        entry = load_config(config_path=str(path)).resolve_authconfig(registry=registry)
    except DockerException as err:
        raise RemoteError(f"{path}: cannot read the credentials for {host} ({type(err).__name__})") from None
    if not entry:
        return None
    token = entry.get("IdentityToken") or entry.get("identitytoken")
    if token:
        return Credentials(identity_token=str(token))
    user = entry.get("username") or entry.get("Username")
    password = entry.get("password") or entry.get("Password")
    return Credentials(username=user, password=password) if user or password else None


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.partition(" ")
    return scheme.lower(), dict(_CHALLENGE.findall(rest))


DEFAULT_TOKEN_LIFETIME = 60.0  # seconds, when the token service names none (the token spec's default)


@dataclass(frozen=True)
class Token:
    """An Authorization header value and when it stops being good (monotonic seconds; None: never)."""

    header: str
    expires: float | None = None

    def fresh(self, now: float) -> bool:
        """Still good for a request that starts now (``expires`` already keeps a margin)."""
        return self.expires is None or now < self.expires


class TokenCache:
    """Authorization header values by scope, shared by the threads of one backend.

    A Bearer token is dropped from the cache shortly before it expires, so a long transfer
    made of many requests asks the token service for a new one instead of being refused
    in the middle (Harbor's tokens live 30 minutes; a 100 GB checkpoint takes longer).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, Token] = {}

    def get(self, scope: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            for key in (scope, "*"):
                token = self._tokens.get(key)
                if token is not None and token.fresh(now):
                    return token.header
        return None

    def put(self, scope: str, value: str | Token) -> None:
        with self._lock:
            self._tokens[scope] = value if isinstance(value, Token) else Token(value)

    def drop(self, scope: str) -> None:
        with self._lock:
            self._tokens.pop(scope, None)


def basic_header(creds: Credentials) -> str:
    raw = f"{creds.username or ''}:{creds.password or ''}".encode()
    return "Basic " + base64.b64encode(raw).decode()


def fetch_token(
    transport: Transport, challenge: dict[str, str], scope: str, creds: Credentials | None, host: str
) -> Token:
    """A Bearer token from the realm of a WWW-Authenticate challenge, with its lifetime."""

    realm = challenge.get("realm")
    if not realm:
        raise RemoteError(f"{host} asked for a Bearer token but named no realm")
    params = {"service": challenge.get("service", "")}
    if scope:
        params["scope"] = scope
    headers: dict[str, str] = {}
    try:
        if creds and creds.identity_token:
            form = {
                **params,
                "grant_type": "refresh_token",
                "refresh_token": creds.identity_token,
                "client_id": "trainops",
            }
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            resp = transport.request("POST", realm, headers=headers, body=urlencode(form).encode())
        else:
            if creds and creds.username:
                headers["Authorization"] = basic_header(creds)
            sep = "&" if "?" in realm else "?"
            resp = transport.request("GET", f"{realm}{sep}{urlencode(params)}", headers=headers)
        resp.content  # noqa: B018 - read the answer, free the connection
    except TransportError as err:
        raise RemoteError(f"{host}: cannot reach its token service {realm.split('?', 1)[0]} ({err})") from None
    if resp.status_code in (401, 403):
        raise RemoteError(
            f"{host}: the token service refused the credentials",
            hint=f"run `docker login {host}` (trainops reads Docker's config.json)",
        )
    if resp.status_code != 200:
        raise RemoteError(f"{host}: token service {realm} answered {resp.status_code}")
    received = time.monotonic()
    try:
        body = resp.json()
    except ValueError:
        raise RemoteError(f"{host}: token service {realm} answered with something that is not JSON") from None
    token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
    if not token or not isinstance(token, str):
        raise RemoteError(f"{host}: token service {realm} returned no token")
    return Token(f"Bearer {token}", received + _usable_life(body.get("expires_in")))


def _usable_life(expires_in: Any) -> float:
    """Seconds to use a token for: its lifetime less a margin (a quarter of it, at most 30 s)."""
    life = float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else DEFAULT_TOKEN_LIFETIME
    return life - min(30.0, life / 4)
