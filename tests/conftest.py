"""Fixtures for real services.  The logic lives in ``tests/services.py``.

Services start only when a test asks for them (no autouse fixture).  A missing binary
fails the test with the install command; it never skips.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from services import (
    DistributionRegistry,
    MotoS3,
    PodmanService,
    ServiceError,
    bare_git_repo,
    build_busybox_image,
)


def _start(service: DistributionRegistry | MotoS3 | PodmanService) -> None:
    try:
        service.start()
        return
    except ServiceError as exc:  # includes MissingDependency: fail, with the fix named
        error = str(exc)
    service.stop()
    pytest.fail(error, pytrace=False)  # outside the except: no chained traceback


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DistributionRegistry]:
    """A CNCF Distribution registry on a free loopback port; ``.host``, ``.url``, ``.restart()``."""
    reg = DistributionRegistry(tmp_path_factory.mktemp("registry"))
    _start(reg)
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """moto's S3 server; ``.endpoint_url``, ``.client()``, ``.new_bucket()``."""
    server = MotoS3(tmp_path_factory.mktemp("moto"))
    _start(server)
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh, empty bucket's name; AWS_* env points boto3 at the moto server."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return s3_server.new_bucket(f"trainops-test-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory, registry: DistributionRegistry) -> Iterator[PodmanService]:
    """Podman's Docker-compatible API; ``.docker_host``, ``.env``, ``.client()``, ``.podman()``.

    The session ``registry`` is listed as insecure, so images push to it over HTTP.
    """
    svc = PodmanService(tmp_path_factory.mktemp("podman"), insecure_registries=[registry.host])
    _start(svc)
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def busybox_image(podman: PodmanService, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Tag of a local ``FROM scratch`` + static busybox image (``/bin/sh`` works)."""
    client = podman.client()
    try:
        return build_busybox_image(client, context_dir=tmp_path_factory.mktemp("busybox-ctx"))
    except ServiceError as exc:
        error = str(exc)
    finally:
        client.close()
    pytest.fail(error, pytrace=False)


@pytest.fixture
def git_remote(tmp_path: Path) -> Path:
    """Path of an empty bare git repository whose default branch is ``main``."""
    try:
        return bare_git_repo(tmp_path / "remote.git")
    except ServiceError as exc:
        error = str(exc)
    pytest.fail(error, pytrace=False)
