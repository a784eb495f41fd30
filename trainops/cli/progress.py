"""Rich progress bars for transfers, on stderr, only when it is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from trainops.units import format_size


class RichProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress

    def add(self, name: str, total: int) -> Callable[[int], None]:
        task = self._progress.add_task(name, total=total)
        return lambda n: self._progress.advance(task, n)


class _Null:
    def add(self, name: str, total: int) -> Callable[[int], None]:
        return lambda _n: None


def _binary_column_class() -> Any:
    from rich.progress import ProgressColumn, Task  # lazy: loads rich
    from rich.text import Text  # lazy: loads rich

    class BinaryTransferColumn(ProgressColumn):
        """`12.0 MiB/1.0 GiB 85.3 MiB/s`: rich's DownloadColumn counts in decimal MB; trainops
        prints every size in KiB/MiB/GiB."""

        def render(self, task: Task) -> Text:
            done = format_size(task.completed)
            total = format_size(task.total) if task.total is not None else "?"
            speed = f" {format_size(task.speed)}/s" if task.speed else ""
            return Text(f"{done}/{total}{speed}", style="progress.download")

    return BinaryTransferColumn


def binary_transfer_column() -> Any:
    """A rich progress column: bytes done/total and speed in binary units (format_size)."""
    return _binary_column_class()()


@contextmanager
def transfer_progress(enabled: bool = True) -> Iterator[Any]:
    """A ProgressSink: rich bars on a TTY, silence otherwise (CI logs, pipes, --output json)."""
    if not enabled or not sys.stderr.isatty():
        yield _Null()
        return
    from rich.console import Console  # lazy: loads rich
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # lazy: loads rich

    columns = (
        TextColumn("{task.description}", table_column=None),
        BarColumn(),
        binary_transfer_column(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        yield RichProgress(progress)
