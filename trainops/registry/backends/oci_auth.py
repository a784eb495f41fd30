"""Registry credentials from Docker's config.json, and the Basic/Bearer token dance.

Credentials come from `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`):
`auths.<host>.auth` (base64 user:password), `auths.<host>.identitytoken`, and the
`credHelpers`/`credsStore` helpers (`docker-credential-<name> get`). They are never
logged or put into an error message.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import RemoteError

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


def _helper(name: str, host: str) -> Credentials | None:
    try:
        out = subprocess.run(
            [f"docker-credential-{name}", "get"], input=host, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return None
    user, secret = data.get("Username"), data.get("Secret")
    if user == "<token>":
        return Credentials(identity_token=secret)
    return Credentials(username=user, password=secret)


def load_credentials(host: str) -> Credentials | None:
    """Credentials for host (host[:port]) from Docker's config, or None."""
    path = docker_config_path()
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    helper = (config.get("credHelpers") or {}).get(host)
    if helper:
        return _helper(helper, host)
    auths: dict[str, Any] = config.get("auths") or {}
    for key in (host, f"https://{host}", f"http://{host}", f"https://{host}/v1/", f"https://{host}/v2/"):
        entry = auths.get(key)
        if not entry:
            continue
        if entry.get("identitytoken"):
            return Credentials(identity_token=entry["identitytoken"])
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise RemoteError(f"{path}: the auth entry for {host} is not base64 user:password") from None
            return Credentials(username=user, password=password)
    if config.get("credsStore"):
        return _helper(str(config["credsStore"]), host)
    return None


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


def fetch_token(session: Any, challenge: dict[str, str], scope: str, creds: Credentials | None, host: str) -> Token:
    """A Bearer token from the realm of a WWW-Authenticate challenge, with its lifetime."""
    realm = challenge.get("realm")
    if not realm:
        raise RemoteError(f"{host} asked for a Bearer token but named no realm")
    params = {"service": challenge.get("service", "")}
    if scope:
        params["scope"] = scope
    headers = {}
    if creds and creds.identity_token:
        resp = session.post(
            realm,
            data={
                **params,
                "grant_type": "refresh_token",
                "refresh_token": creds.identity_token,
                "client_id": "trainops",
            },
            timeout=60,
        )
    else:
        if creds and creds.username:
            headers["Authorization"] = basic_header(creds)
        resp = session.get(realm, params=params, headers=headers, timeout=60)
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
