"""How commands print: JSON through the one serialization home, tables that keep their key
data readable at 80 columns (`--wide` for more). The shared options are in cli/options.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


def echo_json(result: Any) -> None:
    """Print a result as JSON, through the one serialization home (camelCase by construction)."""
    from trainops.serialize import dumps

    click.echo(dumps(result))


def console(*, wide: bool = False) -> Any:
    """A rich console for human output (imported only when a command prints a table).

    On a terminal, its width; piped (CI logs, files), $COLUMNS if set, else 80 columns
    (or 400 with --wide, so nothing folds)."""
    import os
    import sys

    from rich.console import Console

    width: int | None = None
    if not sys.stdout.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and not wide else (400 if wide else 80)
    return Console(highlight=False, soft_wrap=False, width=width)


def command_stdout(output: str) -> Any:
    """Where a command trainops runs for the user writes its stdout: ours, except under
    `-o json`, where stdout carries the result alone and the command's output goes to stderr."""
    import io
    import sys

    if output != "json":
        return None
    try:
        sys.stderr.fileno()
    except (AttributeError, io.UnsupportedOperation):  # a captured stderr (tests): the real one
        return sys.__stderr__
    return sys.stderr


def screen_width() -> int:
    """The width plain text is laid out to, as console() sizes a table: a terminal's own
    width; piped, $COLUMNS if set, else 80. Without rich, which hot paths do not import."""
    import os
    import shutil
    import sys

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() else 80


def echo_columns(
    title: str, headers: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, width: int | None = None
) -> None:
    """A plain aligned table (title, header, rows): linear in its rows, where a rich table
    of ten thousand rows takes seconds to lay out. Listings that can be long use it.

    A cell with newlines folds onto as many lines as it has (a narrow column of metrics).
    With width, a first cell too long to keep the table within it (a long tag) stands whole
    on a line of its own, the row's other cells on the line below: folded, never cut. The
    title (a repository) stays whole on its own line, as every listing's heading does."""
    cells = [[c.split("\n") for c in row] for row in rows]
    widths = [max([len(h), *(len(part) for r in cells for part in r[i])]) for i, h in enumerate(headers)]
    alone: set[int] = set()  # the rows whose first cell stands on a line of its own
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        budget = max(len(headers[0]), width - sum(widths[1:]) - 2 * (len(widths) - 1))
        alone = {i for i, row in enumerate(cells) if any(len(part) > budget for part in row[0])}
        widths[0] = max([len(headers[0]), *(len(p) for i, r in enumerate(cells) if i not in alone for p in r[0])])
    lines = [title, "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for i, row in enumerate(cells):
        if i in alone:
            lines.extend(row[0])
            row = [[""], *row[1:]]
        for n in range(max(len(c) for c in row)):
            parts = [c[n] if n < len(c) else "" for c in row]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
    click.echo("\n".join(lines))


def duration_text(value: float | None) -> str:
    """Seconds for a table: `41.5s`, `3m07s`, `2h05m`; `-` for none."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def lineage_text(key: str, value: Any) -> str:
    """A lineage field as text: metrics as sorted `name=1.5` pairs, the Python environment
    recorded in place of an image as one short line, other objects (a forced release's
    reason and author) as `key=value` pairs in their recorded order, scalars as they are."""
    if not isinstance(value, dict):
        return str(value)
    if key == "environment":
        digest = str(value.get("digest", ""))[:19]
        where = f"{value.get('python')} {value.get('implementation')} {value.get('platform')}"
        return f"{where}, {value.get('packages')} packages ({digest})"
    pairs = sorted(value.items()) if key == "metrics" else value.items()
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in pairs)
