"""Shared CLI options and printing: `--output json` everywhere a command reports data, `-v`
after any command, tables that keep their key data readable at 80 columns (`--wide` for more)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

output_option = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Human text, or JSON for scripts.",
)

render_out_option = click.option(
    "-d",
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the tree to DIR (new, empty, or rendered before); default: print it.",
)


wide_option = click.option("--wide", is_flag=True, help="Every column, in full (the default table fits 80 columns).")


def _bump_verbosity(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """`-v` after a subcommand says more, as it does before it (`trainops push -v …`)."""
    import logging

    if value:
        root = logging.getLogger()
        root.setLevel(max(logging.DEBUG, min(root.level or logging.WARNING, logging.WARNING - 10 * value)))
    return value


verbose_option = click.option(
    "-v",
    "--verbose",
    "verbose",
    count=True,
    expose_value=False,
    is_eager=True,
    callback=_bump_verbosity,
    help="Say more (repeat for debug logs).",
)


def add_verbose(command: click.Command) -> None:
    """Give command and every subcommand the shared -v option (unless it has one)."""
    if not any("-v" in getattr(p, "opts", ()) for p in command.params):
        verbose_option(command)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_verbose(sub)


def manifest_options(func: F) -> F:
    """-f FILE and --env ENV, the two options of every command that reads trainops.yaml."""
    func = click.option("--env", "env", metavar="ENV", default=None, help="Apply this environment's overlay.")(func)
    func = click.option(
        "-f",
        "--file",
        "file",
        type=click.Path(dir_okay=False, path_type=str),
        default="trainops.yaml",
        show_default=True,
        help="The manifest.",
    )(func)
    return func


def kubeconfig_options(func: F) -> F:
    """--kubeconfig FILE and --context NAME: the cluster a command reads (kubectl's options)."""
    func = click.option(
        "--context", "context", metavar="NAME", default=None, help="The kubeconfig context (default: its current one)."
    )(func)
    func = click.option(
        "--kubeconfig",
        "kubeconfig",
        type=click.Path(dir_okay=False, path_type=str),
        default=None,
        metavar="FILE",
        help="The kubeconfig (default: $KUBECONFIG, else ~/.kube/config).",
    )(func)
    return func


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


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


def short_time(created: str | None) -> str:
    """`2026-12-03T15:36:28Z` → `2026-12-03 15:36`, a table's width (--wide shows it whole)."""
    return (created or "").replace("T", " ")[:16]


def table(columns: tuple[str, ...], *, wide: bool) -> Any:
    """A rich table whose cells fold instead of being cut to `…` (all shown with --wide)."""
    from rich import box
    from rich.table import Table

    out = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for name in columns:
        out.add_column(name, overflow="fold", no_wrap=wide)
    return out


def key_values(values: tuple[str, ...], what: str) -> dict[str, str]:
    """KEY=VALUE options → a dict; a malformed one is a usage error naming the option."""
    from trainops.errors import UsageError

    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {item!r} must be KEY=VALUE")
        out[key] = value
    return out


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


def echo_columns(title: str, headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """A plain aligned table (title, header, rows): linear in its rows, where a rich table
    of ten thousand rows takes seconds to lay out. Listings that can be long use it.

    A cell with newlines folds onto as many lines as it has (a narrow column of metrics)."""
    cells = [[c.split("\n") for c in row] for row in rows]
    widths = [max([len(h), *(len(part) for r in cells for part in r[i])]) for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
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
