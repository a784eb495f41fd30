"""Fixtures for real services.  The logic lives in ``trainops_testing/services.py``.

Services start only when a test asks for them (no autouse fixture).  A missing binary
fails the test with the install command; it never skips.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops_testing import planted
from trainops_testing.services import (
    DistributionRegistry,
    MotoS3,
    PodmanService,
    ServiceError,
    bare_git_repo,
    build_busybox_image,
)

# Fixtures that start a cluster or an engine: a test that uses one costs tens of seconds.
SERVICE_FIXTURES = frozenset({"kube_cluster", "kube_cluster_factory", "slurm_cluster", "slurm_nodes_cluster", "podman"})
SERVICE_WEIGHT = 20  # a service test weighs as much as this many other tests


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def _file_weights(items: list[pytest.Item]) -> dict[str, int]:
    weights: dict[str, int] = {}
    for item in items:
        heavy = not SERVICE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        file = _file(item)
        weights[file] = weights.get(file, 0) + (SERVICE_WEIGHT if heavy else 1)
    return weights


def _leave_out(config: pytest.Config, items: list[pytest.Item], *, out: Callable[[pytest.Item], bool]) -> None:
    left = [item for item in items if out(item)]
    if left:
        items[:] = [item for item in items if not out(item)]
        config.hook.pytest_deselected(items=left)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest files first (tests that start clusters and engines weigh most), so that
    parallel workers (scripts/run-tests.sh: pytest-xdist, a file to a worker, in this order)
    end together rather than one worker running the slow files alone at the end. Tests
    marked `after_all` run after every other test collected, whatever their folder's name:
    the planted-secrets scan reads what all the others wrote.

    A worker of a parallel run leaves out `after_all` tests, since the others may still be
    writing, and `alone` tests, which compare the pace of processes on this machine and so
    cannot share it with other workers: scripts/run-tests.sh runs the `alone` tests in one
    process once every worker has ended (TRAINOPS_TESTS_ALONE=1 keeps only them), then the
    `after_all` ones."""
    if os.environ.get("TRAINOPS_TESTS_ALONE") == "1":  # first: a caller's `-n` must not drop them
        _leave_out(config, items, out=lambda item: not _marked(item, "alone") or _marked(item, "after_all"))
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        _leave_out(config, items, out=lambda item: _marked(item, "after_all") or _marked(item, "alone"))
    weights = _file_weights(items)
    items.sort(key=lambda item: (_marked(item, "after_all"), -weights[_file(item)]))  # stable


def _marked(item: pytest.Item, name: str) -> bool:
    return item.get_closest_marker(name) is not None


@pytest.fixture(scope="session", autouse=True)
def _planted_record(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the session, what it planted (trainops_testing/planted.py) is recorded in
    its temporary directory: the scan after a parallel run reads every worker's record."""
    yield
    planted.record(tmp_path_factory.getbasetemp())


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


# ------------------------------------------------------------- the simulated Kubernetes cluster


def _kube_skipped() -> None:
    """TRAINOPS_SKIP_KUBE=1 skips the cluster tests on purpose (a machine without Go); any
    other missing piece fails with the command that builds it."""
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        pytest.skip("TRAINOPS_SKIP_KUBE=1: the simulated Kubernetes cluster is not built here")


def _start_kube(directory: Path, **kwargs: Any) -> Any:
    from trainops_testing.kube_cluster import KubeCluster

    cluster = KubeCluster(directory, **kwargs)
    try:
        cluster.start()
        return cluster
    except ServiceError as exc:
        error = str(exc)
    cluster.stop()
    pytest.fail(error, pytrace=False)


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The simulated cluster (trainops_testing/kube_cluster.py) with every component: 8 kwok nodes × 8 GPUs
    in 2 racks; ``.kubeconfig``, ``.server``, ``.api`` (a small REST client), ``.nodes``,
    ``.env`` (KUBECONFIG), ``.kubectl(...)``. Shared by the session: tests use their own
    namespaces and delete what they create."""
    _kube_skipped()
    cluster = _start_kube(tmp_path_factory.mktemp("kube"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kube_cluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """Start a cluster of a test's (or module's) own shape or components:
    ``kube_cluster_factory(shape=Shape(nodes=3), components=("etcd", "apiserver", "kwok"))``;
    call its ``.stop()`` when done (whatever is left running stops at the session's end)."""
    _kube_skipped()
    started: list[Any] = []

    def make(**kwargs: Any) -> Any:
        cluster = _start_kube(tmp_path_factory.mktemp("kube"), **kwargs)
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()
