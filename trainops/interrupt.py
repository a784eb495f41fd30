"""Ctrl-C during a transfer: stop every worker within a second, publish nothing.

A SIGINT reaches the main thread only; transfer workers run in threads, blocked in a
socket's sendfile or in a retry's sleep. `cancel()` (called where the main thread sees the
KeyboardInterrupt) sets one flag that workers check between chunks and that retries obey
(no more attempts), and runs the hooks the transports registered: each shuts its sockets
down, so a blocked send or receive returns at once. The command then raises `Interrupted`
(exit 130), whose one line says what was and was not published.

Standard library only: imported on the hot paths of push and pull.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TypeVar

from trainops.errors import TrainopsError

T = TypeVar("T")
R = TypeVar("R")
NOTHING_PUBLISHED = (
    "nothing was published (no tag, no manifest); run the same command again to resume (what was sent is kept)"
)
NOTHING_PULLED = "only whole, verified files are in the destination; run the same command again to finish"

_cancelled = threading.Event()
_hooks: list[weakref.WeakMethod[Callable[[], None]]] = []
_lock = threading.Lock()


class Interrupted(TrainopsError):
    """Ctrl-C: what the command left, and how to resume; exit 130 as shells report it."""

    exit_code = 130


class Cancelled(Exception):
    """Raised in a worker thread that finds the transfer cancelled (never reaches the user:
    the main thread raises Interrupted)."""


def on_cancel(method: Callable[[], None]) -> None:
    """Call method (a bound method, held weakly) when the transfers are cancelled."""
    with _lock:
        _hooks.append(weakref.WeakMethod(method))


def cancel() -> None:
    """Stop every transfer of this process: the flag, then each live hook (sockets shut)."""
    _cancelled.set()
    with _lock:
        hooks = [ref() for ref in _hooks]
    for hook in hooks:
        if hook is not None:
            with contextlib.suppress(Exception):  # a hook that fails must not stop the others
                hook()


def cancelled() -> bool:
    return _cancelled.is_set()


def check() -> None:
    """In a worker, between chunks: raise Cancelled once the transfers are cancelled."""
    if _cancelled.is_set():
        raise Cancelled("the transfer was cancelled (Ctrl-C)")


def parallel(func: Callable[[T], R], items: Iterable[T], jobs: int, *, on_interrupt: str) -> list[R]:
    """func over items in up to `jobs` threads, results in order. Ctrl-C cancels every
    worker at once (cancel()) and raises Interrupted(on_interrupt): what was left, and how
    to resume."""
    from concurrent.futures import ThreadPoolExecutor  # lazy: loads concurrent.futures

    items = list(items)
    if jobs <= 1 or len(items) <= 1:
        try:
            return [func(item) for item in items]
        except KeyboardInterrupt:
            cancel()
            raise Interrupted(on_interrupt) from None
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(items)))
    try:
        results = list(pool.map(func, items))
    except KeyboardInterrupt:
        cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        raise Interrupted(on_interrupt) from None
    except BaseException:
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return results
