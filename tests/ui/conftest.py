"""Fixtures of the browser tests: registries filled on file://, oci:// and s3://, the ui
server on a free loopback port (uvicorn in a thread), and Debian's chromium via Playwright."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainops.registry.context import Registries
from trainops.ui.app import create_app
from trainops.ui.index import Index, refresh
from trainops.ui.views import Browser
from trainops_testing.services import MotoS3, free_port, require, wait_for
from ui.helpers import Filled, fill

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Site:
    """A running ui server over one filled registry."""

    base: str
    filled: Filled
    browser: Browser
    scheme: str

    def url(self, path: str) -> str:
        return self.base + path


class ServerThread:
    """uvicorn serving an ASGI app on 127.0.0.1:port in a thread; stop() ends it."""

    def __init__(self, app: Any, port: int) -> None:
        import uvicorn

        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=20, what=f"ui server on port {self.port}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture(scope="session")
def _ui_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("TRAINOPS_CACHE_DIR")
    os.environ["TRAINOPS_CACHE_DIR"] = str(tmp_path_factory.mktemp("ui-cache"))
    yield
    if old is None:
        os.environ.pop("TRAINOPS_CACHE_DIR", None)
    else:
        os.environ["TRAINOPS_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def _aws_env(s3_server: MotoS3) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in s3_server.env}
    os.environ.update(s3_server.env)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _registries_for(request: pytest.FixtureRequest, scheme: str, tmp: Path) -> tuple[str, Registries]:
    if scheme == "file":
        url = f"file://{tmp / 'registry'}"
        return url, Registries(default_registry=url)
    if scheme == "oci":
        registry = request.getfixturevalue("registry")
        url = f"oci://{registry.host}/ui{uuid.uuid4().hex[:8]}"
        return url, Registries(default_registry=url, insecure_registries=(registry.host,))
    request.getfixturevalue("_aws_env")
    server: MotoS3 = request.getfixturevalue("s3_server")
    bucket = server.new_bucket(f"trainops-ui-{uuid.uuid4().hex[:10]}")
    url = f"s3://{bucket}/reg"
    return url, Registries(default_registry=url)


def start_site(request: pytest.FixtureRequest, scheme: str, tmp: Path, *, token: str | None = None) -> Iterator[Site]:
    url, registries = _registries_for(request, scheme, tmp)
    filled = fill(registries, url, tmp / "work")
    index = Index(tmp / "index.sqlite")
    result = refresh(index, registries, urls=[url])
    assert not result.errors, result.errors
    browser = Browser(index=index, registries=registries, urls=[url], token=token)
    server = ServerThread(create_app(browser), free_port())
    server.start()
    try:
        yield Site(f"http://127.0.0.1:{server.port}", filled, browser, scheme)
    finally:
        server.stop()
        registries.close()


@pytest.fixture(scope="module", params=["file", "oci", "s3"])
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _ui_cache: None) -> Iterator[Site]:
    """The ui over a registry of each scheme, filled by ui.helpers.fill."""
    yield from start_site(request, request.param, tmp_path_factory.mktemp(f"ui-{request.param}"))


@pytest.fixture(scope="module")
def file_site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _ui_cache: None
) -> Iterator[Site]:
    """The ui over a filled file:// registry."""
    yield from start_site(request, "file", tmp_path_factory.mktemp("ui-file"))


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (never `playwright install`)."""
    require("chromium", "apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page that records dialogs (alert) and console errors."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.errors = []  # type: ignore[attr-defined]

    def on_dialog(dialog: Any) -> None:
        pg.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda err: pg.errors.append(str(err)))  # type: ignore[attr-defined]
    yield pg
    context.close()
