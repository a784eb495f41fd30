"""Rich progress bars for transfers, on stderr, only when it is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class RichProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress

    def add(self, name: str, total: int) -> Callable[[int], None]:
        task = self._progress.add_task(name, total=total)
        return lambda n: self._progress.advance(task, n)


class _Null:
    def add(self, name: str, total: int) -> Callable[[int], None]:
        return lambda _n: None


@contextmanager
def transfer_progress(enabled: bool = True) -> Iterator[Any]:
    """A ProgressSink: rich bars on a TTY, silence otherwise (CI logs, pipes, --output json)."""
    if not enabled or not sys.stderr.isatty():
        yield _Null()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("{task.description}", table_column=None),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        yield RichProgress(progress)
