"""A chunked checkpoint's page says how many bytes it shares with its parent, and lists its
files (not its packs): a real browser server over a file:// registry."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
import requests

from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.inspect import show
from trainops.registry.lineage_data import Lineage, Parent
from trainops.ui import queries
from trainops.ui.app import create_app
from trainops.ui.index import Index, refresh
from trainops.ui.views import Browser
from trainops_testing.finetune import FineTune, MiB
from trainops_testing.services import free_port
from ui.conftest import ServerThread


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))


def test_a_chunked_checkpoint_page_shows_the_bytes_shared_with_its_parent(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    series = FineTune(tensors=8, tensor_size=MiB // 2)
    with Registries(default_registry=url) as registries:
        repo = registries.ref(f"{url}/tiny/checkpoints")
        first = store.push(
            registries,
            source=series.checkpoint(tmp_path / "s1"),
            ref=repo.with_tag("step-1"),
            kind="checkpoint",
            dedup="chunks",
        )
        parent = Parent(digest=first.digest, ref=repo.repo_url, relation="parent")
        second = store.push(
            registries,
            source=series.checkpoint(tmp_path / "s2"),
            ref=repo.with_tag("step-2"),
            kind="checkpoint",
            lineage=Lineage(parents=(parent,)),
            dedup="chunks",
        )
        expected = show(registries, ref=repo.with_tag("step-2")).chunked
        assert expected is not None and expected.bytes_shared_with_parent
        index = Index(tmp_path / "index.sqlite")
        assert not refresh(index, registries, urls=[url]).errors
        found = queries.artifact(index.connect(), digest=second.digest)
        assert found.shared_with_parent == expected.bytes_shared_with_parent
        assert queries.artifact(index.connect(), digest=first.digest).shared_with_parent is None  # no parent
        assert [(f.path, f.chunked) for f in found.files] == [("config.json", False), ("model.safetensors", True)]
        server = ServerThread(create_app(Browser(index=index, registries=registries, urls=[url])), free_port())
        server.start()
        try:
            page = requests.get(f"http://127.0.0.1:{server.port}/artifact/{second.digest}", timeout=30)
        finally:
            server.stop()
    assert page.status_code == 200
    text = html.unescape(page.text)
    share = round(100 * expected.bytes_shared_with_parent / found.size)
    assert 45 <= share <= 55
    assert f"({share} %) with its parent" in text
