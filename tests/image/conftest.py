"""Fixtures for image build tests: a busybox base in an OCI layout, the Podman engine's env.

Nothing is pulled from the internet: the base is the session's ``busybox_image`` (a
``FROM scratch`` + static busybox image built by Podman), copied out of Podman's storage
into an OCI image layout with skopeo, which is what a file:// trainops registry is.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.helpers import BASE_REPO, Layout, run
from trainops_testing.services import PodmanService, require


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Own digest cache; no SOURCE_DATE_EPOCH, debug or engine from the developer's shell."""
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for name in ("SOURCE_DATE_EPOCH", "TRAINOPS_DEBUG", "TRAINOPS_INSECURE_REGISTRIES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def pristine_layout(podman: PodmanService, busybox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("skopeo", "apt-get install -y skopeo")
    root = tmp_path_factory.mktemp("base-layout")
    (root / BASE_REPO).mkdir(parents=True)
    run(
        ["skopeo", "copy", "--quiet", f"containers-storage:{busybox_image}", f"oci:{root / BASE_REPO}:latest"],
        env=podman.subprocess_env(),
    )
    return root


@pytest.fixture
def layout(pristine_layout: Path, tmp_path: Path) -> Layout:
    """A fresh copy of the base layout for one test."""
    root = tmp_path / "registry"
    shutil.copytree(pristine_layout, root)
    return Layout(root)


@pytest.fixture
def podman_env(podman: PodmanService, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """DOCKER_HOST (for trainops) and the CONTAINERS_* variables (for podman/skopeo) of the service."""
    monkeypatch.setenv("DOCKER_HOST", podman.docker_host)
    yield podman.subprocess_env()
