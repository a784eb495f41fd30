"""A registry token service for tests: short-lived JWTs that CNCF Distribution accepts.

Distribution's `auth: token` mode sends clients to a realm that issues Bearer tokens: JWTs
signed by a key whose certificate the registry trusts (`rootcertbundle`). This service
issues them on a free loopback port, signed (ES256) with a throw-away key and a
self-signed certificate carried in the `x5c` header, with a lifetime the test chooses
(seconds), so a transfer outlives several tokens, as a 100 GB checkpoint outlives Harbor's
30-minute ones.

Distribution accepts a token for 60 s past its `exp` (clock-skew leeway), so the `exp`
written is `issued + lifetime - LEEWAY`: the registry then refuses the token `lifetime`
seconds after it was issued.

``advertised`` makes the service tell clients a longer life than the registry grants (a
revoked token, or clocks that disagree): the client then meets a 401 mid-transfer.

Basic credentials are checked when the service was given some (`user`, `password`); every
token request is recorded (`requests`) so tests can count refreshes.
"""

from __future__ import annotations

import base64
import datetime
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

LEEWAY = 60  # seconds Distribution adds to exp and subtracts from nbf
ISSUER = "trainops-test-issuer"
SERVICE = "trainops-test-registry"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenRequest:
    scope: str
    user: str | None
    at: float


@dataclass
class TokenIssuer:
    """Issues registry tokens valid for ``lifetime`` seconds; ``start()`` / ``stop()``."""

    directory: Path
    lifetime: float = 3600.0
    advertised: float | None = None  # expires_in told to clients; None: the real lifetime
    user: str | None = None
    password: str | None = None
    requests: list[TokenRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_path = self.directory / "token-issuer.crt"
        self.cert_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def realm(self) -> str:
        if self._server is None:
            raise RuntimeError("token issuer not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/token"

    def issue(self, scope: str) -> str:
        """A signed token granting every action the scope asks for."""
        issued = int(time.time())
        access = []
        for item in scope.split():
            kind, _, rest = item.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind and name:
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        claims = {
            "iss": ISSUER,
            "sub": self.user or "anonymous",
            "aud": SERVICE,
            "exp": issued + int(self.lifetime) - LEEWAY,
            "nbf": issued - LEEWAY,
            "iat": issued,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        der = self._cert.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def _authenticate(self, header: str | None) -> tuple[bool, str | None]:
        if self.user is None:
            return True, None
        if not header or not header.startswith("Basic "):
            return False, None
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return (user == self.user and password == self.password), user

    def start(self) -> None:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)
                ok, user = issuer._authenticate(self.headers.get("Authorization"))
                if not ok:
                    self._reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]})
                    return
                scope = " ".join(query.get("scope", []))
                with issuer._lock:
                    issuer.requests.append(TokenRequest(scope=scope, user=user, at=time.time()))
                token = issuer.issue(scope)
                told = issuer.lifetime if issuer.advertised is None else issuer.advertised
                self._reply(200, {"token": token, "expires_in": int(told)})

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def registry_auth_config(self) -> str:
        """The `auth:` section of a Distribution config that trusts this issuer."""
        return (
            "auth:\n  token:\n"
            f"    realm: {self.realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    rootcertbundle: {self.cert_path}\n"
        )
