"""HTTP/1.1 for the oci:// backend, on the standard library's http.client.

Why not requests: `import requests` costs ~110 ms on a loaded 2-core machine against
~30 ms for http.client (a `registry ls` is mostly start-up), and a transfer wants what
requests hides: `readinto` a reused buffer (no fresh 1 MiB object per chunk, which the
kernel must fault in), `sendfile` of an upload on plain HTTP, and Content-Length checked
on every streamed body. What requests gave and this keeps:

- TLS verified by default: the system's CAs (and `SSL_CERT_FILE`/`SSL_CERT_DIR`) plus
  certifi's bundle where it is installed, or only `REQUESTS_CA_BUNDLE`/`CURL_CA_BUNDLE`.
- Proxies from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and `NO_PROXY` (an http:// proxy;
  HTTPS through it with CONNECT).
- Connection reuse: each thread keeps its own idle connections, so a backend is safe to
  share between threads; a pooled connection the server has closed is replaced.
- Redirects of GET and HEAD (blob downloads are often sent to a CDN or object store),
  without the Authorization header once the request leaves the registry's origin.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import unquote, urljoin, urlsplit

from trainops import interrupt

CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 300.0
SEND_CHUNK = 8 * 1024 * 1024  # bytes per sendfile call (and per progress report)
FRAME = 1024 * 1024  # bytes per chunk of a chunked body: how soon such a body can end on Ctrl-C
STOP_TIMEOUT = 5.0  # seconds to wait, after Ctrl-C, for the answer to a body that ended early
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_IDLE_PER_ORIGIN = 4
_DRAIN = 64 * 1024  # an unread body up to this size is read to keep its connection


class TransportError(Exception):
    """The connection failed: refused, reset, timed out, or closed in the middle of a body."""


class UnknownHostError(TransportError):
    """The host name does not resolve (DNS says no such name): retrying cannot help."""


class TLSError(TransportError):
    """The TLS handshake or certificate check failed."""


@dataclass
class Upload:
    """A request body read from a file: `length` bytes from `offset`, sent as they are read
    (with sendfile where the connection is plain TCP); `progress` hears of every piece.

    chunked: sent with Transfer-Encoding: chunked, in FRAME-sized chunks; on Ctrl-C
    (trainops.interrupt) the body ends cleanly at a chunk's end (`stopped`) and the answer
    is read, instead of the connection being cut: the server then holds exactly `sent`
    bytes and says so (an OCI upload session that a later run resumes)."""

    fh: BinaryIO
    offset: int
    length: int
    progress: Callable[[int], None]
    sent: int = 0
    chunked: bool = False
    stopped: bool = False


class Response:
    """A response whose body is read once: all at once (`content`, `json`) or streamed
    (`readinto`). Its connection goes back to the pool when the body has been read."""

    def __init__(
        self, raw: http.client.HTTPResponse, url: str, release: Callable[[bool], None], sock: socket.socket | None
    ) -> None:
        self.raw, self.url, self._release, self._sock = raw, url, release, sock
        self.status_code = raw.status
        self.reason = raw.reason
        self.headers = raw.headers
        length = raw.getheader("Content-Length")
        self.length = int(length) if length and length.isdigit() and not raw.chunked else None
        self.received = 0
        self._content: bytes | None = None
        self._done = False

    @property
    def content(self) -> bytes:
        if self._content is None:
            try:
                self._content = self.raw.read()
            except (OSError, http.client.HTTPException) as err:
                self._finish(reuse=False)
                raise _transport_error(err) from None
            self._finish(reuse=True)
        return self._content

    def json(self) -> Any:
        return json.loads(self.content)

    def readinto(self, buffer: memoryview) -> int:
        """Fill buffer from the body; 0 at its end. A body that ends short of its
        Content-Length raises TransportError (http.client would return 0)."""
        try:
            n = self.raw.readinto(buffer)
        except (OSError, http.client.HTTPException) as err:
            self._finish(reuse=False)
            raise _transport_error(err) from None
        self.received += n
        if n == 0 and len(buffer):
            if self.length is not None and self.received < self.length:
                self._finish(reuse=False)
                raise TransportError(f"the connection closed after {self.received} of {self.length} bytes")
            self._finish(reuse=True)
        return n

    def close(self) -> None:
        """Done with the response: a short body left unread is read so that the connection
        can be reused; a longer one costs the connection."""
        if self._done:
            return
        left = self.raw.length
        reuse = self.raw.isclosed()
        if not reuse and not self.raw.chunked and left is not None and left <= _DRAIN:
            try:
                self._content = self.raw.read()
                reuse = True
            except (OSError, http.client.HTTPException):
                reuse = False
        self._finish(reuse=reuse)

    def abort(self) -> None:
        """From another thread: end the connection, so that a read blocked on it returns."""
        if self._sock is not None and not self._done:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def _finish(self, *, reuse: bool) -> None:
        if self._done:
            return
        self._done = True
        reuse = reuse and not self.raw.will_close
        if not reuse:
            self.raw.close()
        self._release(reuse)

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_FAILURES = (OSError, http.client.HTTPException, TransportError)


def _transport_error(err: BaseException) -> TransportError:
    if isinstance(err, TransportError):
        return err
    if isinstance(err, (ssl.SSLError, ssl.CertificateError)):
        return TLSError(str(err) or type(err).__name__)
    text = str(err) or type(err).__name__
    if isinstance(err, socket.timeout):
        text = "timed out"
    elif isinstance(err, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(err, (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)):
        text = "connection reset"
    elif isinstance(err, socket.gaierror):
        if err.errno != socket.EAI_AGAIN:  # EAI_AGAIN: the resolver timed out, worth a retry
            return UnknownHostError("name or service not known (DNS)")
        text = "name resolution failed for now"
    return TransportError(text)


class _Plain(http.client.HTTPConnection):
    """http.client's connection, connecting to an ASCII host by bytes: socket would encode
    a str with the idna codec, whose import (stringprep, unicodedata) costs more than the
    whole of a `registry ls` request."""

    def connect(self) -> None:
        host = self.host.encode("ascii") if self.host.isascii() else self.host
        self.sock = socket.create_connection((host, self.port), self.timeout)  # type: ignore[arg-type]
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tunnel_host:  # type: ignore[attr-defined]
            self._tunnel()  # type: ignore[attr-defined]


class _TLS(http.client.HTTPSConnection, _Plain):
    """HTTPS: http.client's TLS on _Plain's connect."""


_Origin = tuple[str, str, str | None]  # scheme, host:port, proxy URL


class Transport:
    """HTTP requests with pooled connections (per thread), TLS, proxies and redirects."""

    def __init__(self, *, user_agent: str = "trainops") -> None:
        self.user_agent = user_agent
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[http.client.HTTPConnection] = []
        self._ending: set[socket.socket] = set()  # sockets of chunked bodies: they end themselves on Ctrl-C
        self._tls: Any = None
        interrupt.on_cancel(self.abort)

    # -- connections -------------------------------------------------------------------
    def _idle(self) -> dict[_Origin, list[http.client.HTTPConnection]]:
        idle: dict[_Origin, list[http.client.HTTPConnection]] | None = getattr(self._local, "idle", None)
        if idle is None:
            idle = self._local.idle = {}
        return idle

    def _tls_context(self) -> Any:
        if self._tls is None:
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            context = ssl.create_default_context(cafile=bundle or None)
            if not bundle:
                try:
                    import certifi  # type: ignore[import-not-found,unused-ignore]
                except ImportError:
                    pass
                else:
                    context.load_verify_locations(certifi.where())
            self._tls = context
        return self._tls

    def _connect(self, origin: _Origin) -> http.client.HTTPConnection:
        scheme, netloc, proxy = origin
        conn: http.client.HTTPConnection
        if proxy is None:
            if scheme == "https":
                conn = _TLS(netloc, timeout=CONNECT_TIMEOUT, context=self._tls_context())
            else:
                conn = _Plain(netloc, timeout=CONNECT_TIMEOUT)
        else:
            parts = urlsplit(proxy)
            if parts.scheme != "http":
                raise TransportError(f"proxy {parts.scheme}://{parts.hostname}: only http:// proxies are supported")
            where = f"{parts.hostname}:{parts.port or 80}"
            if scheme == "https":
                conn = _TLS(where, timeout=CONNECT_TIMEOUT, context=self._tls_context())
                conn.set_tunnel(netloc, headers=_proxy_auth(parts))
            else:
                conn = _Plain(where, timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise _transport_error(err) from None
        assert conn.sock is not None
        conn.sock.settimeout(READ_TIMEOUT)
        with self._lock:
            if len(self._all) > 64:
                self._all = [c for c in self._all if c.sock is not None]
            self._all.append(conn)
        return conn

    def _checkout(self, origin: _Origin) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to origin: an idle one still open (reused=True), else a new one."""
        idle = self._idle().get(origin) or []
        while idle:
            conn = idle.pop()
            sock = conn.sock
            # An idle connection that has something to read was closed by the server.
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return conn, True
            conn.close()
        return self._connect(origin), False

    def _checkin(self, origin: _Origin, conn: http.client.HTTPConnection, reuse: bool) -> None:
        idle = self._idle().setdefault(origin, [])
        if reuse and conn.sock is not None and len(idle) < _IDLE_PER_ORIGIN:
            idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    def abort(self) -> None:
        """Ctrl-C (trainops.interrupt): shut every socket down, from any thread, so a worker
        blocked sending or receiving returns at once; the workers then close them. A socket
        sending a chunked body is left to end it (within a chunk) and read the answer."""
        with self._lock:
            sockets = [conn.sock for conn in self._all if conn.sock is not None and conn.sock not in self._ending]
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    # -- requests ----------------------------------------------------------------------
    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | Upload | None = None,
        follow: bool = True,
    ) -> Response:
        """Send one request and read the response's headers; redirects of GET and HEAD
        are followed (Authorization is dropped when one leaves the origin)."""
        all_headers = {"User-Agent": self.user_agent, "Accept-Encoding": "identity", **(headers or {})}
        for _ in range(10):
            resp = self._send(method, url, all_headers, body)
            location = resp.headers.get("Location")
            if not follow or method not in ("GET", "HEAD") or resp.status_code not in REDIRECTS or not location:
                return resp
            resp.close()
            target = urljoin(url, location)
            if _origin_of(target) != _origin_of(url):
                all_headers = {k: v for k, v in all_headers.items() if k.lower() != "authorization"}
            url = target
        raise TransportError(f"too many redirects from {url.split('?', 1)[0]}")

    def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | Upload | None) -> Response:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        netloc = parts.netloc.rpartition("@")[2]
        proxy = _proxy_for(scheme, netloc)
        origin: _Origin = (scheme, netloc, proxy)
        target = (
            url
            if proxy is not None and scheme == "http"
            else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        )
        if proxy is not None and scheme == "http":
            headers = {**headers, **_proxy_auth(urlsplit(proxy))}
        conn, reused = self._checkout(origin)
        try:
            raw = self._exchange(conn, method, target, netloc, headers, body)
        except _FAILURES as err:
            conn.close()
            if not reused or not _rewind(body):
                raise _transport_error(err) from None
            # A kept-alive connection the server closed meanwhile: once more, on a new one.
            conn = self._connect(origin)
            try:
                raw = self._exchange(conn, method, target, netloc, headers, body)
            except _FAILURES as err2:
                conn.close()
                raise _transport_error(err2) from None
        return Response(raw, url, lambda reuse: self._checkin(origin, conn, reuse), conn.sock)

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        netloc: str,
        headers: dict[str, str],
        body: bytes | Upload | None,
    ) -> http.client.HTTPResponse:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", netloc)
        for key, value in headers.items():
            conn.putheader(key, value)
        if isinstance(body, Upload) and body.chunked:
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            sock = conn.sock
            assert sock is not None
            with self._lock:
                self._ending.add(sock)
            try:
                _send_chunked(sock, body)
                return conn.getresponse()
            finally:
                with self._lock:
                    self._ending.discard(sock)
        if isinstance(body, Upload):
            conn.putheader("Content-Length", str(body.length))
            conn.endheaders()
            try:
                _send_upload(conn, body)
            except OSError:
                # The server may have answered (401, 413 …) and closed before the body
                # was all sent: that answer, if it can be read, says more than EPIPE.
                try:
                    return conn.getresponse()
                except _FAILURES:
                    pass
                raise
        else:
            if body is not None or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body or b"")))
            conn.endheaders(body)
        return conn.getresponse()


def _send_upload(conn: http.client.HTTPConnection, body: Upload) -> None:
    """Send body's bytes: sendfile on a plain socket (no copy through Python), else reads
    of SEND_CHUNK from the file's current position and sendall (TLS, streams)."""
    sock = conn.sock
    assert sock is not None
    body.sent = 0
    zero_copy = type(sock) is socket.socket and _has_fileno(body.fh)
    position = body.offset
    while body.sent < body.length:
        interrupt.check()
        count = min(SEND_CHUNK, body.length - body.sent)
        if zero_copy:
            n = sock.sendfile(body.fh, position, count)
        else:
            data = body.fh.read(count)
            sock.sendall(data)
            n = len(data)
        if n == 0:
            raise TransportError(f"the file ended after {body.sent} of {body.length} bytes")
        body.sent += n
        position += n
        body.progress(n)


def _send_chunked(sock: socket.socket, body: Upload) -> None:
    """Send body as chunks of FRAME bytes, then the last chunk; on Ctrl-C the body ends at
    the end of the chunk being sent (body.stopped), and the answer is awaited STOP_TIMEOUT."""
    body.sent = 0
    zero_copy = type(sock) is socket.socket and _has_fileno(body.fh)
    position = body.offset
    while body.sent < body.length:
        if interrupt.cancelled():
            body.stopped = True
            sock.settimeout(STOP_TIMEOUT)
            break
        count = min(FRAME, body.length - body.sent)
        sock.sendall(b"%x\r\n" % count)
        done = 0
        while done < count:
            if zero_copy:
                n = sock.sendfile(body.fh, position + done, count - done)
            else:
                data = body.fh.read(count - done)
                sock.sendall(data)
                n = len(data)
            if n == 0:
                raise TransportError(f"the file ended after {body.sent + done} of {body.length} bytes")
            done += n
        sock.sendall(b"\r\n")
        body.sent += count
        position += count
        body.progress(count)
    sock.sendall(b"0\r\n\r\n")


def _has_fileno(fh: BinaryIO) -> bool:
    try:
        fh.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _rewind(body: bytes | Upload | None) -> bool:
    """Make body ready to be sent again; False if it cannot be (a stream, partly sent)."""
    if not isinstance(body, Upload):
        return True
    if body.sent:
        return False
    try:
        body.fh.seek(body.offset)
    except (OSError, ValueError):
        return False
    return True


def _origin_of(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _proxy_for(scheme: str, netloc: str) -> str | None:
    """The proxy the environment names for this URL (requests' rules), or None."""
    if not any(key.lower().endswith("_proxy") for key in os.environ):
        return None
    import urllib.request  # lazy: loads tempfile, urllib.request

    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 - not in typeshed
    if not proxy or bypass(netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _proxy_auth(parts: Any) -> dict[str, str]:
    if not parts.username:
        return {}

    raw = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Proxy-Authorization": "Basic " + base64.b64encode(raw).decode()}
