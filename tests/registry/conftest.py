"""Fixtures for Store-level tests: one registry of each scheme, behind a Registries object."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainops.registry.context import Registries


@dataclass
class Target:
    """A registry to test against: its URL, and Registries completing short refs with it."""

    scheme: str
    url: str
    registries: Registries

    def ref(self, name: str) -> str:
        return f"{self.url}/{name}"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own digest and manifest cache."""
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(params=["file", "oci", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    scheme = request.param
    if scheme == "file":
        url = f"file://{tmp_path / 'registry'}"
        registries = Registries(default_registry=url)
    elif scheme == "oci":
        registry = request.getfixturevalue("registry")
        url = f"oci://{registry.host}/t{uuid.uuid4().hex[:10]}"
        registries = Registries(default_registry=url, insecure_registries=(registry.host,))
    else:
        bucket = request.getfixturevalue("s3_bucket")
        assert os.environ.get("AWS_ENDPOINT_URL")
        url = f"s3://{bucket}/reg"
        registries = Registries(default_registry=url)
    with registries:
        yield Target(scheme, url, registries)


def make_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root
