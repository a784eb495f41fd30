"""The browser's guard: host check, token, and security headers on every response.

- Bound to loopback, the Host header must name loopback (127.0.0.1, localhost, [::1]): a
  web page elsewhere cannot reach the browser through DNS rebinding.
- With a token (required on any other address), a request needs `Authorization: Bearer
  TOKEN`, or the `trainops_ui_token` cookie; opening a page with `?token=TOKEN` sets that
  cookie (HttpOnly, SameSite=Strict) and redirects to the same page without the token.
- Every response carries a Content-Security-Policy that allows scripts, styles, images and
  connections from this server only, and forbids framing, plugins and form posts elsewhere.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "trainops_ui_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware around the app (see the module's docstring)."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback_only: bool) -> None:
        self.app = app
        self.token = token
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.loopback_only and not is_loopback(_host_name(headers.get("host", ""))):
            await _plain(send, 421, "this browser answers only to 127.0.0.1 or localhost")
            return
        if self.token is not None:
            verdict = self._check(scope, headers)
            if verdict == "redirect":
                await _redirect_with_cookie(scope, send, self.token)
                return
            if verdict == "denied":
                await _plain(
                    send, 401, "a token is required: open the URL trainops ui printed, or send Authorization: Bearer"
                )
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope, headers: dict[str, str]) -> str:
        assert self.token is not None
        expected = self.token.encode()
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and hmac.compare_digest(bearer[7:].encode(), expected):
            return "ok"
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no credential
            cookie = SimpleCookie()
        if COOKIE in cookie and hmac.compare_digest(cookie[COOKIE].value.encode(), expected):
            return "ok"
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and hmac.compare_digest(query["token"].encode(), expected):
            return "redirect"
        return "denied"


async def _plain(send: Send, status: int, text: str) -> None:
    body = json.dumps({"error": text, "status": status}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(scope: Scope, send: Send, token: str) -> None:
    query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k != "token"]
    location = quote(scope.get("path", "/")) + (f"?{urlencode(query)}" if query else "")
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode()),
                (b"set-cookie", cookie.encode()),
                (b"content-length", b"0"),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
