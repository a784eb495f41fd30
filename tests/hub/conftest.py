"""The hub tests' model (trainops_testing.hf_cache), its cache and an offline Hub serving it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainops_testing.hf_cache import REPO_ID, TAG, HfCache, ModelMissing, build_hf_cache, installed_model


@pytest.fixture(scope="session")
def model_dir() -> Path:
    try:
        return installed_model()
    except ModelMissing as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def hf_cache(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> HfCache:
    return build_hf_cache(tmp_path_factory.mktemp("hf") / "hub", model_dir)


@pytest.fixture(autouse=True)
def _hub_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real Hub: offline, an own digest cache, no token of the machine's."""
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path_factory.mktemp("trainops-cache")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf-home")))
    for name in ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@dataclass(frozen=True)
class Hub:
    endpoint: str
    repo_id: str
    commit: str  # the mirror's git commit of main (and of TAG)


@pytest.fixture(scope="session")
def hub_server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """olah serving the model as a git repository over the Hub's HTTP API, offline."""
    from tests.hub.hubserver import OlahHub, git_mirror
    from trainops_testing.services import ServiceError

    work = tmp_path_factory.mktemp("olah")
    commit = git_mirror(work / "mirrors", REPO_ID, model_dir, tag=TAG)
    server = OlahHub(work, work / "mirrors")
    try:
        server.start()
    except ServiceError as err:
        server.stop()
        pytest.fail(str(err), pytrace=False)
    yield Hub(server.endpoint, REPO_ID, commit)
    server.stop()
