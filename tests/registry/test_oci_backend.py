"""The oci:// backend against real Distribution registries: faults, restarts, TLS, auth, pagination."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.registry.proxy import FaultProxy
from trainops.errors import IntegrityError, RemoteError
from trainops.registry.backends.base import BlobSource
from trainops.registry.backends.oci import OCIBackend
from trainops.registry.reference import RegistryRoot
from trainops_testing import planted
from trainops_testing.services import DistributionRegistry

PASSWORD = planted.secret("registry-password")


def _source(tmp_path: Path, size: int) -> BlobSource:
    data = os.urandom(size)
    path = tmp_path / f"blob-{uuid.uuid4().hex[:8]}"
    path.write_bytes(data)
    return BlobSource("sha256:" + hashlib.sha256(data).hexdigest(), size, path=path)


def _backend(host: str, insecure: bool = True) -> OCIBackend:
    return OCIBackend(RegistryRoot("oci", host, ""), insecure=insecure)


def test_retries_503s_on_every_kind_of_call(registry: DistributionRegistry, tmp_path: Path) -> None:
    with FaultProxy(registry.host) as proxy:
        backend = _backend(proxy.host)
        src = _source(tmp_path, 300_000)
        proxy.fail_next = 2
        backend.upload_blob("faults/a", src)
        proxy.fail_next = 2
        assert backend.blob_size("faults/a", src.digest) == src.size
        proxy.fail_next = 2
        backend.download_blob("faults/a", src.digest, tmp_path / "out")
        assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]
        assert proxy.failures_served == 6


def test_resumes_a_download_cut_mid_stream(registry: DistributionRegistry, tmp_path: Path) -> None:
    src = _source(tmp_path, 2_000_000)
    _backend(registry.host).upload_blob("faults/b", src)
    with FaultProxy(registry.host) as proxy:
        proxy.cut_next_body_after = 700_000
        seen: list[int] = []
        _backend(proxy.host).download_blob("faults/b", src.digest, tmp_path / "out", seen.append)
        assert proxy.cuts_served == 1
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]


def test_gives_up_with_a_clear_error_when_the_registry_stays_down(registry: DistributionRegistry) -> None:
    with FaultProxy(registry.host) as proxy:
        proxy.fail_next = 100
        with pytest.raises(RemoteError, match="503"):
            _backend(proxy.host).blob_size("faults/c", "sha256:" + "0" * 64)


def test_registry_restart_during_an_upload(tmp_path: Path) -> None:
    reg = DistributionRegistry(tmp_path / "data")
    reg.start()
    try:
        backend = _backend(reg.host)
        src = _source(tmp_path, 96 * 1024 * 1024)
        sent = 0
        restarted = threading.Event()
        errors: list[BaseException] = []

        def progress(n: int) -> None:
            nonlocal sent
            sent += n
            if sent >= 24 * 1024 * 1024 and not restarted.is_set():
                restarted.set()
                reg.restart()  # in the middle of the PUT body

        def upload() -> None:
            try:
                backend.upload_blob("restart/x", src, progress)
            except BaseException as err:
                errors.append(err)

        worker = threading.Thread(target=upload)
        worker.start()
        worker.join(timeout=300)
        assert restarted.is_set() and not worker.is_alive()
        assert not errors, errors
        assert backend.blob_size("restart/x", src.digest) == src.size
        backend.download_blob("restart/x", src.digest, tmp_path / "back")
    finally:
        reg.stop()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_registry(tmp_path: Path) -> Iterator[tuple[DistributionRegistry, Path]]:
    cert, key = _self_signed(tmp_path)
    reg = DistributionRegistry(tmp_path / "tls-data", tls=(cert, key))
    reg.start()
    yield reg, cert
    reg.stop()


def test_tls_is_verified_by_default(
    tls_registry: tuple[DistributionRegistry, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reg, cert = tls_registry
    with pytest.raises(RemoteError, match="TLS with") as err:
        _backend(reg.host, insecure=False).blob_size("tls/x", "sha256:" + "0" * 64)
    assert "REQUESTS_CA_BUNDLE" in str(err.value)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    backend = _backend(reg.host, insecure=False)
    src = _source(tmp_path, 10_000)
    backend.upload_blob("tls/x", src)
    assert backend.blob_size("tls/x", src.digest) == src.size


def test_plain_http_registry_not_marked_insecure(registry: DistributionRegistry) -> None:
    with pytest.raises(RemoteError) as err:
        _backend(registry.host, insecure=False).blob_size("x/y", "sha256:" + "0" * 64)
    assert f"TRAINOPS_INSECURE_REGISTRIES={registry.host}" in str(err.value)


@pytest.fixture
def auth_registry(tmp_path: Path) -> Iterator[DistributionRegistry]:
    import bcrypt

    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"alice:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=5)).decode()}\n")
    reg = DistributionRegistry(tmp_path / "auth-data", htpasswd=htpasswd)
    reg.start()
    yield reg
    reg.stop()


def _docker_config(tmp_path: Path, host: str, password: str) -> Path:
    config = tmp_path / "docker"
    config.mkdir(exist_ok=True)
    auth = base64.b64encode(f"alice:{password}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    planted.source(config / "config.json")  # Docker's credential store: where the password belongs
    return config


def test_basic_auth_from_docker_config(
    auth_registry: DistributionRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, auth_registry.host, PASSWORD)))
    backend = _backend(auth_registry.host)
    src = _source(tmp_path, 50_000)
    backend.upload_blob("auth/x", src)
    backend.download_blob("auth/x", src.digest, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]


def test_wrong_or_missing_credentials(
    auth_registry: DistributionRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(_docker_config(tmp_path, auth_registry.host, "wrong-pw")))
    with pytest.raises(RemoteError, match="docker login") as err:
        _backend(auth_registry.host).blob_size("auth/x", "sha256:" + "0" * 64)
    assert "wrong-pw" not in str(err.value)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    with pytest.raises(RemoteError, match="docker login"):
        _backend(auth_registry.host).blob_size("auth/x", "sha256:" + "0" * 64)


def test_tag_pagination(registry: DistributionRegistry, tmp_path: Path) -> None:
    from trainops.registry import store
    from trainops.registry.context import Registries

    ns = f"page{uuid.uuid4().hex[:6]}"
    reg = Registries(default_registry=f"oci://{registry.host}/{ns}", insecure_registries=(registry.host,))
    (tmp_path / "f").write_text("x")
    for i in range(5):
        store.push(reg, source=tmp_path / "f", ref=reg.ref(f"m:t{i}"))
    backend = reg.backend(reg.ref("m"))
    assert isinstance(backend, OCIBackend)
    backend.page_size = 2
    assert backend.list_tags(f"{ns}/m") == [f"t{i}" for i in range(5)]
    assert f"{ns}/m" in backend.list_repositories()


def test_upload_of_bytes_that_do_not_match_is_rejected(registry: DistributionRegistry, tmp_path: Path) -> None:
    src = _source(tmp_path, 1000)
    lying = BlobSource("sha256:" + "1" * 64, src.size, path=src.path)
    with pytest.raises(IntegrityError):
        _backend(registry.host).upload_blob("lie/x", lying)
