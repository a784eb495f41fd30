"""Registries as Docker users know them: loopback is plain HTTP by default, Docker Hub names
and the Hub's credential key resolve as Docker (docker-py's docker.auth) resolves them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from trainops.registry.backends import is_loopback, open_backend
from trainops.registry.backends.oci import OCIBackend
from trainops.registry.backends.oci.auth import load_credentials
from trainops.registry.reference import parse_reference
from trainops_testing.cli import run


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost:5000", True),
        ("localhost", True),
        ("127.0.0.1:5000", True),
        ("127.9.8.7", True),
        ("[::1]:5000", True),
        ("[::1]", True),
        ("10.0.0.1:5000", False),
        ("registry.example.com", False),
        ("localhost.example.com:5000", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    backend = open_backend(parse_reference(f"oci://{host}/a/b").root)
    assert isinstance(backend, OCIBackend)
    assert backend.base.startswith("http://" if loopback else "https://")


def test_a_loopback_registry_needs_no_insecure_flag(registry: object, tmp_path: Path) -> None:
    port = registry.host.rsplit(":", 1)[1]  # type: ignore[attr-defined]
    (tmp_path / "f").write_text("x")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        out = run(
            "push", str(tmp_path / "f"), f"oci://{host}/docker/plain:v1", env={"TRAINOPS_INSECURE_REGISTRIES": None}
        )
        assert out.code == 0, out.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("oci://docker.io/ubuntu:22.04", "oci://docker.io/library/ubuntu:22.04"),
        ("oci://docker.io/library/python:3", "oci://docker.io/library/python:3"),
        ("oci://index.docker.io/library/python:3", "oci://docker.io/library/python:3"),
        ("oci://index.docker.io/bitnami/redis:7", "oci://docker.io/bitnami/redis:7"),
        ("oci://ghcr.io/org/model:1", "oci://ghcr.io/org/model:1"),
        ("oci://mydocker.io/x:1", "oci://mydocker.io/x:1"),
    ],
)
def test_docker_hub_names(text: str, expected: str) -> None:
    assert str(parse_reference(text)) == expected


def test_docker_hub_is_reached_at_its_api_host() -> None:
    hub = open_backend(parse_reference("oci://docker.io/ubuntu:22.04").root)
    assert isinstance(hub, OCIBackend) and hub.base == "https://registry-1.docker.io" and hub.host == "docker.io"


def _config(tmp_path: Path, auths: dict[str, dict[str, str]]) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"auths": auths}))
    return tmp_path


def _auth(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_credentials_resolve_as_docker_resolves_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    auths = {
        "https://index.docker.io/v1/": _auth("hub-user", "hub-pw"),  # what `docker login` writes for the Hub
        "https://registry.example.com/v2/": _auth("legacy", "pw1"),  # a legacy URL key
        "127.0.0.1:5000": {"identitytoken": "refresh-token"},
    }
    monkeypatch.setenv("DOCKER_CONFIG", str(_config(tmp_path, auths)))
    for host in ("docker.io", "index.docker.io"):
        hub = load_credentials(host)
        assert hub is not None and (hub.username, hub.password) == ("hub-user", "hub-pw")
        assert "hub-pw" not in repr(hub)
    legacy = load_credentials("registry.example.com")
    assert legacy is not None and legacy.username == "legacy"
    token = load_credentials("127.0.0.1:5000")
    assert token is not None and token.identity_token == "refresh-token"
    assert load_credentials("other.example.com") is None
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "none"))
    assert load_credentials("docker.io") is None
