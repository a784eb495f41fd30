"""A real fault-injecting HTTP reverse proxy on loopback, in front of a real registry.

Faults: answer the next N requests with 503; cut the next response body after K bytes
(the TCP connection is closed mid-stream, as a flaky network does); flip one byte of the
next blob body; redirect blob GETs elsewhere (as registries send them to a CDN). It
records each request's method, path and headers (`seen`).
"""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream  # host:port
        self.lock = threading.Lock()
        self.fail_next = 0
        self.fail_status = 503  # what a failed request is answered with (429: too many requests)
        self.retry_after: str | None = None  # a Retry-After header on the failures
        self.cut_next_body_after: int | None = None
        self.flip_next_blob_byte: int | None = None  # offset in the next blob GET's body
        self.redirect_blobs_to: str | None = None  # a base URL: blob GETs answer 307 there
        self.strip_range = False  # drop Range headers: a registry that serves only whole blobs
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.connections: list[tuple[str, int]] = []  # the client's address of each request
        self.requests = 0
        self.failures_served = 0
        self.cuts_served = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def _handle(self) -> None:
                with proxy.lock:
                    proxy.requests += 1
                    fail = proxy.fail_next > 0
                    if fail:
                        proxy.fail_next -= 1
                        proxy.failures_served += 1
                    proxy.seen.append((self.command, self.path, dict(self.headers.items())))
                    proxy.connections.append(self.client_address)
                    blob_get = self.command == "GET" and "/blobs/sha256:" in self.path
                    cut = proxy.cut_next_body_after if blob_get else None
                    if cut is not None:
                        proxy.cut_next_body_after = None
                        proxy.cuts_served += 1
                    flip = proxy.flip_next_blob_byte if blob_get else None
                    if flip is not None:
                        proxy.flip_next_blob_byte = None
                    redirect = proxy.redirect_blobs_to if blob_get else None
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if redirect is not None and not fail:
                    self.send_response(307)
                    self.send_header("Location", redirect + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if fail:
                    self.send_response(proxy.fail_status)
                    if proxy.retry_after is not None:
                        self.send_header("Retry-After", proxy.retry_after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                if proxy.strip_range:
                    headers = {k: v for k, v in headers.items() if k.lower() != "range"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if flip is not None and flip < len(data):
                    data = data[:flip] + bytes([data[flip] ^ 0xFF]) + data[flip + 1 :]
                self.send_response(resp.status)
                for key, value in resp.getheaders():
                    if key.lower() in HOP or (key.lower() == "content-length" and self.command != "HEAD"):
                        continue
                    if key.lower() == "location" and value.startswith("http"):
                        parts = urlsplit(value)
                        value = value.replace(parts.netloc, proxy.host, 1)
                    self.send_header(key, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if cut is not None and self.command != "HEAD":
                    self.wfile.write(data[:cut])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
