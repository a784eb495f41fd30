"""The simulated cluster's PKI and a small REST client for its API server.

Certificates are made with openssl at start (EC P-256, 30 days): a CA, the API server's and
the webhooks' serving certificates for 127.0.0.1, an admin client certificate
(system:masters) and the service-account signing key. ``KubeApi`` is just enough of the
Kubernetes REST API for the fixtures, tests and benchmarks: trainops has its own client.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.services import MissingDependency, ServiceError

FIELD_MANAGER = "trainops-kubesim"


# ------------------------------------------------------------------------- certificates


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise MissingDependency("openssl not found: apt-get install -y openssl")
    proc = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ServiceError(f"openssl {' '.join(args[:2])}: {proc.stderr.strip()}")


def _ec_key(name: str, pki: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=pki)


def _signed_cert(name: str, subject: str, extensions: str, pki: Path) -> None:
    _ec_key(name, pki)
    (pki / f"{name}.ext").write_text(extensions)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=pki)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "30", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki,
    )  # fmt: skip


def make_pki(pki: Path) -> None:
    """CA, API server serving cert, admin client cert, webhook serving cert, SA key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    _ec_key("ca", pki)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=trainops-kubesim-ca", "-days", "30",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-out", "ca.crt", cwd=pki,
    )  # fmt: skip
    server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:10.96.0.1\n"
    server_ext += "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"
    _signed_cert("apiserver", "/CN=kube-apiserver", server_ext, pki)
    _signed_cert("webhook", "/CN=kubesim-webhooks", server_ext, pki)
    client_ext = "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n"
    _signed_cert("admin", "/O=system:masters/CN=trainops-admin", client_ext, pki)
    _ec_key("sa", pki)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(path: Path, server: str, pki: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [
            {
                "name": "trainops-admin",
                "user": {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
            }
        ],
        "contexts": [{"name": "kubesim", "context": {"cluster": "kubesim", "user": "trainops-admin"}}],
        "current-context": "kubesim",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


class ApiError(ServiceError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi:
    """Just enough of the Kubernetes REST API for the fixtures, tests and benchmarks.

    Client-certificate auth from the cluster's PKI; discovery maps apiVersion/kind to the
    resource path; ``apply`` is server-side apply with strict field validation.
    """

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server.rstrip("/")
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Any:
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            with contextlib.suppress(ValueError):
                detail = json.loads(detail).get("message", detail)
            raise ApiError(exc.code, f"{method} {path}: {detail}") from None
        return json.loads(raw) if raw else None

    def readyz(self) -> bool:
        """Is the API server ready (GET /readyz answers 200)?"""
        req = urllib.request.Request(self.server + "/readyz")
        with urllib.request.urlopen(req, context=self.context, timeout=2) as resp:
            return bool(resp.status == 200)

    def _discover(self, api_version: str) -> None:
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        for res in self.request("GET", base)["resources"]:
            if "/" not in res["name"]:
                self._resources[(api_version, res["kind"])] = (f"{base}/{{ns}}{res['name']}", res["namespaced"])

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of a kind (a collection, or one object when ``name`` is given)."""
        if (api_version, kind) not in self._resources:
            self._discover(api_version)
        if (api_version, kind) not in self._resources:
            raise ServiceError(f"the API server does not serve {kind} in {api_version}")
        template, namespaced = self._resources[(api_version, kind)]
        ns = f"namespaces/{namespace}/" if namespaced and namespace else ""
        return template.format(ns=ns) + (f"/{name}" if name else "")

    def forget(self, api_version: str) -> None:
        """Drop cached discovery (after installing CRDs of that group/version)."""
        for key in [k for k in self._resources if k[0] == api_version]:
            del self._resources[key]

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False, manager: str = FIELD_MANAGER) -> Any:
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        query = {"fieldManager": manager, "force": "true", "fieldValidation": "Strict"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request(
            "PATCH", path, json.dumps(obj).encode(), content_type="application/apply-patch+yaml", query=query
        )

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, *, selector: str | None = None
    ) -> list[dict[str, Any]]:
        query = {"labelSelector": selector} if selector else None
        items: list[dict[str, Any]] = self.request("GET", self.path(api_version, kind, namespace), query=query)["items"]
        return items

    def create(self, obj: dict[str, Any]) -> Any:
        meta = obj["metadata"]
        return self.request("POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")), obj)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        with contextlib.suppress(ApiError):
            self.request(
                "DELETE",
                self.path(api_version, kind, namespace, name),
                {"propagationPolicy": "Background"},
            )

    def merge_patch(self, api_version: str, kind: str, name: str, patch: Any, namespace: str | None = None) -> Any:
        path = self.path(api_version, kind, namespace, name)
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")
