"""Shared CLI options and printing: `--output json` everywhere a command reports data."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def console() -> Any:
    """A rich console for human output (imported only when a command prints a table)."""
    import sys

    from rich.console import Console

    # Piped output (CI logs, files) gets a wide fixed width instead of rich's 80 columns.
    width = None if sys.stdout.isatty() else 160
    return Console(highlight=False, soft_wrap=False, width=width)


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
