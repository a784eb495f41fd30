"""`trainops alerts serve`: Alertmanager's webhook receiver, recording SLO alerts as incidents.

POST /alerts with Alertmanager's webhook body (webhook_config `url: http://HOST:PORT/alerts`,
`http_config.authorization.credentials: TOKEN`). A shared token is always required (Bearer),
compared in constant time; bound to loopback (the default), the Host header must name loopback
too, as the browser's guard does (trainops.ui.security). Answers: 200 with the incident ids
recorded, 400 a body that is not a notification, 401 no or a wrong token, 404 another path,
413 a body over 1 MiB, 421 a foreign Host, 422 an alert trainops cannot name, 503 the registry
or GitOps repository unreachable. Nothing is recorded unless every alert of the body can be.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from trainops.errors import TrainopsError, UsageError
from trainops.manifest import Manifest
from trainops.ui.alerts import MAX_BODY, BadAlert, MalformedAlert, record, serialize_body
from trainops.ui.security import is_loopback

log = logging.getLogger(__name__)
PATH = "/alerts"


class Receiver:
    """The webhook server on host:port (port 0: a free one), in a thread or in the foreground."""

    def __init__(self, manifest: Manifest, *, host: str, port: int, token: str | None, insecure: bool = False) -> None:
        if not token:
            raise UsageError(
                "the alert receiver needs a shared token", hint="pass --token or set TRAINOPS_ALERTS_TOKEN"
            )
        self.manifest = manifest
        self.token = token
        self.insecure = insecure
        self.loopback_only = is_loopback(host)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                status, body = receiver.handle(self.path, dict(self.headers.items()), self._body)
                self._answer(status, body)

            def do_GET(self) -> None:
                self._answer(405, {"error": "POST Alertmanager's webhook notifications to /alerts"})

            def _body(self) -> bytes | None:
                length = int(self.headers.get("Content-Length") or 0)
                return None if length > MAX_BODY else self.rfile.read(length)

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                log.warning("alert receiver: the connection from %s broke off", client_address[0])

        try:
            self.server = Server((host, port), Handler)
        except OSError as err:
            raise UsageError(f"cannot listen on {host}:{port}: {err.strerror}") from None
        self.port = int(self.server.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}{PATH}"
        self._thread: threading.Thread | None = None

    def handle(self, path: str, headers: dict[str, str], read: Any) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of one request; every refusal is one line, nothing recorded."""
        lower = {k.lower(): v for k, v in headers.items()}
        host = urlsplit("//" + lower.get("host", "")).hostname or ""
        if self.loopback_only and not is_loopback(host):
            return 421, {"error": "this receiver answers only to 127.0.0.1 or localhost"}
        given = lower.get("authorization", "")
        scheme, _, credentials = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(credentials.strip().encode(), self.token.encode()):
            return 401, {"error": "missing or wrong token: send Authorization: Bearer TOKEN"}
        if urlsplit(path).path != PATH:
            return 404, {"error": f"POST notifications to {PATH}"}
        body = read()
        if body is None:
            return 413, {"error": f"a notification is at most {MAX_BODY} bytes"}
        try:
            recorded = record(self.manifest, body, insecure=self.insecure)
        except MalformedAlert as err:
            log.warning("alert receiver: 400 %s", err)
            return 400, {"error": str(err)}
        except BadAlert as err:
            log.warning("alert receiver: 422 %s", err)
            return 422, {"error": str(err)}
        except TrainopsError as err:
            log.warning("alert receiver: 503 %s", err)
            return 503, {"error": str(err)}
        for incident in recorded.incidents:
            log.warning("alert receiver: recorded %s (%s %s, %s)", incident.id, incident.slo, incident.action,
                        incident.action_note)  # fmt: skip
        return 200, serialize_body(recorded)

    def start(self) -> Receiver:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
