"""Running the browser: open (or build) the index, keep it fresh, serve it with uvicorn."""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import NotFoundError, TrainopsError, UsageError
from trainops.projectdir import no_manifest
from trainops.registry.context import Registries
from trainops.registry.digestcache import cache_dir
from trainops.ui.app import create_app
from trainops.ui.index import Index, RefreshResult, refresh
from trainops.ui.security import is_loopback
from trainops.ui.views import Browser

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess
    from trainops.manifest import Manifest

log = logging.getLogger(__name__)
DEFAULT_PORT = 8321


@dataclass(frozen=True)
class Prepared:
    browser: Browser
    first_refresh: RefreshResult | None  # None: the index had data; it is refreshed while serving
    index_path: Path


def default_index_path(urls: list[str]) -> Path:
    """One index file per set of registries, in trainops' cache directory."""
    key = hashlib.sha256("\n".join(sorted(urls)).encode()).hexdigest()[:16]
    return cache_dir() / "ui" / f"index-{key}.sqlite"


def prepare(
    *,
    registries: Registries,
    urls: list[str],
    host: str,
    token: str | None,
    index_path: Path | None = None,
    manifest: Manifest | None = None,
    cluster: ClusterAccess | None = None,
) -> Prepared:
    """Check the address and token and open the index; an empty one is built now (pages
    would have nothing to show), one with data is served at once and refreshed meanwhile.
    A manifest whose spec.rollout is set adds the rollouts that served releases to graphs."""
    if not urls:
        raise NotFoundError(f"no registry to browse, and {no_manifest()}", hint="pass --registry URL, or -f FILE")
    loopback = is_loopback(host)
    if not loopback and not token:
        raise UsageError(
            f"--host {host} is not a loopback address: the browser would be open to the network",
            hint="pass --token (or set TRAINOPS_UI_TOKEN) to require it, or bind 127.0.0.1",
        )
    path = index_path or default_index_path(urls)
    index = Index(path)
    first = refresh(index, registries, urls=urls) if index.is_empty() else None
    browser = Browser(
        index=index,
        registries=registries,
        urls=urls,
        token=token or None,
        loopback_only=loopback,
        manifest=manifest,
        cluster=cluster,
    )
    return Prepared(browser, first, path)


def _refresh_loop(browser: Browser, interval: float, stop: threading.Event, now: bool) -> None:
    """Refresh at once if now, then every interval seconds (never again when interval is 0)."""
    while True:
        if now:
            try:
                refresh(browser.index, browser.registries, urls=browser.urls)
            except TrainopsError as err:  # keep serving what the index has
                log.warning("index refresh failed: %s", err)
        if interval <= 0 or stop.wait(interval):
            return
        now = True


def listen(host: str, port: int) -> socket.socket:
    """The browser's listening socket on host:port (port 0: a free one)."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as err:
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror or err}",
                         hint="pick another --port (0: a free one)") from None  # fmt: skip
    return sock


def serve(
    prepared: Prepared,
    *,
    host: str,
    port: int,
    refresh_seconds: float = 30.0,
    on_listening: Callable[[int], None] | None = None,
) -> None:
    """Serve until interrupted, refreshing the index every refresh_seconds (0: never, except
    once at start when prepare found an index with data and did not refresh it). Once it
    listens, on_listening gets the port (the free one port 0 picked)."""
    import uvicorn  # lazy: loads uvicorn

    sock = listen(host, port)
    if on_listening is not None:
        on_listening(int(sock.getsockname()[1]))
    stop = threading.Event()
    stale = prepared.first_refresh is None
    if refresh_seconds > 0 or stale:
        threading.Thread(
            target=_refresh_loop, args=(prepared.browser, refresh_seconds, stop, stale), daemon=True, name="ui-refresh"
        ).start()
    try:
        config = uvicorn.Config(create_app(prepared.browser), log_level="warning", server_header=False)
        uvicorn.Server(config).run(sockets=[sock])  # Ctrl-C: uvicorn re-raises it once stopped (exit 130)
    finally:
        stop.set()
        sock.close()
