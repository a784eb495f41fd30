"""How commands print: JSON through the one serialization home, tables that keep their key
data readable at 80 columns (`--wide` for more). The shared options are in cli/options.py."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import click

from trainops.units import fold_reference


def echo_json(result: Any) -> None:
    """Print a result as JSON, through the one serialization home (camelCase by construction)."""
    from trainops.serialize import dumps  # lazy: `trainops --help` loads no trainops.serialize

    click.echo(dumps(result))


def console(*, wide: bool = False) -> Any:
    """A rich console for human output (imported only when a command prints a table).

    On a terminal, its width; piped (CI logs, files), $COLUMNS if set, else 80 columns
    (or 400 with --wide, so nothing folds)."""

    from rich.console import Console  # lazy: loads rich

    width: int | None = None
    if not sys.stdout.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and not wide else (400 if wide else 80)
    return Console(highlight=False, soft_wrap=False, width=width)


def command_stdout(output: str) -> Any:
    """Where a command trainops runs for the user writes its stdout: ours, except under
    `-o json`, where stdout carries the result alone and the command's output goes to stderr."""

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
    import shutil  # lazy: `trainops --help` loads no bz2

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() else 80


def echo_columns(
    title: str, headers: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, width: int | None = None
) -> None:
    """The one table style (title, UPPERCASE header, rows, two spaces between columns):
    linear in its rows, where a rich table of ten thousand rows takes seconds to lay out.

    A cell with newlines folds onto as many lines as it has (a narrow column of metrics).
    With width (the screen's, unless --wide): a last column of text too wide for the rest of
    the line folds between its words; a first cell too long to keep the table within it (a
    long tag) stands whole on a line of its own, the row's other cells on the line below:
    folded, never cut. The title (a repository) stays whole on its own line, as every
    listing's heading does."""
    if width is not None and rows:
        rows = _fold_last_column(headers, rows, width)
    cells = [[c.split("\n") for c in row] for row in rows]
    widths = [max([len(h), *(len(part) for r in cells for part in r[i])]) for i, h in enumerate(headers)]
    alone: set[int] = set()  # the rows whose first cell stands on a line of its own
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        budget = max(len(headers[0]), width - sum(widths[1:]) - 2 * (len(widths) - 1))
        alone = {i for i, row in enumerate(cells) if any(len(part) > budget for part in row[0])}
        widths[0] = max([len(headers[0]), *(len(p) for i, r in enumerate(cells) if i not in alone for p in r[0])])
    header = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    lines = [title, header] if title else [header]  # no title: the caller printed the heading
    for i, row in enumerate(cells):
        if i in alone:
            lines.extend(row[0])
            row = [[""], *row[1:]]
        for n in range(max(len(c) for c in row)):
            parts = [c[n] if n < len(c) else "" for c in row]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
    click.echo("\n".join(lines))


def _fold_last_column(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]], width: int) -> list[tuple[str, ...]]:
    """rows with their last cell (prose, references) folded between words or a reference's
    parts to the room the other columns leave, when that is at least 20 columns."""

    lead = [max([len(h), *(len(p) for r in rows for p in r[i].split("\n"))]) for i, h in enumerate(headers[:-1])]
    room = width - sum(lead) - 2 * len(lead)
    if room < 20:
        return list(rows)
    return [(*row[:-1], fold_reference(row[-1], room)) for row in rows]


def fields_text(fields: Sequence[tuple[str, str]], *, wide: bool = False, indent: int = 2, pad: int = 0) -> list[str]:
    """The one record style (`show`, `status`): `key: value` lines, values aligned (at
    least `pad` columns for the key); piped or on a narrow screen a value too long for the
    line folds under its column between its parts (a reference's `/` and `:`, a sentence's
    spaces: never mid-name; a part too long for the column, a digest, goes on a line of its
    own with a shallower indent); --wide keeps each value on one line."""

    if not fields:
        return []
    pad = max(pad, *(len(key) + 2 for key, _ in fields))
    width = screen_width()
    room = width - indent - pad
    out: list[str] = []
    for key, value in fields:
        hang = indent + pad
        if wide:
            parts = [value]
        else:
            longest = max((len(p) for p in re.split(r"(?<=[/: ])", value)), default=0)
            if longest > room:  # a digest: fold to a hanging indent that holds it whole
                hang = indent + 2
            lead = " " * (indent + pad - hang)  # the first line starts at the value column
            parts = fold_reference(lead + value, max(20, width - hang)).split("\n")
            parts[0] = parts[0][len(lead) :]
        out.append(f"{' ' * indent}{key + ':':<{pad}}{parts[0]}".rstrip())
        out += [f"{' ' * hang}{part}" for part in parts[1:]]
    return out


def folded(text: str, *, indent: int, hang: int = 2, wide: bool = False) -> list[str]:
    """text indented by `indent`, folded like `echo_folded`, its further lines `hang` deeper."""

    parts = (text if wide else fold_reference(text, max(20, screen_width() - indent - hang))).split("\n")
    return [" " * indent + parts[0], *(" " * (indent + hang) + part for part in parts[1:])]


def echo_folded(text: str, *, wide: bool = False, err: bool = False) -> None:
    """A line for people (a heading, a summary, a note) folded at the screen's width between
    words or a reference's parts, never mid-name; --wide keeps it on one line."""

    click.echo(text if wide else fold_reference(text, screen_width()), err=err)


def duration_text(value: float | None) -> str:
    """Seconds for a table: `41.5s`, `3m07s`, `2h05m`; `-` for none."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def phases_text(phases: Any) -> str:
    """MTTR's phases (trainops.faults.ettr.Phases) in one line:
    `detect 0.4s, decide 0.1s, reschedule 0.0s, restore 1.2s, first step 2.0s`."""
    parts = [
        ("detect", phases.detect_seconds),
        ("decide", phases.decide_seconds),
        ("reschedule", phases.reschedule_seconds),
        ("restore", phases.restore_seconds),
        ("first step", phases.first_step_seconds),
    ]
    return ", ".join(f"{name} {duration_text(value)}" for name, value in parts)


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
