"""Where each command's documentation lives: the page and anchor of its reference entry under
trainops.DOCS_URL (scripts/gen_docs.py writes the pages at these addresses, and every
command's --help ends with its own)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from trainops import DOCS_URL


def reference_page(path: Sequence[str]) -> str:
    """The reference page of the command at `path` (("registry", "ls")), relative to the site:
    one page per top-level command, the index for `trainops` itself."""
    return f"reference/cli/{path[0]}/" if path else "reference/cli/"


def reference_anchor(path: Sequence[str]) -> str:
    """The anchor of the command's entry on its page: `trainops-registry-ls`."""
    return "-".join(("trainops", *path))


def reference_url(path: Sequence[str]) -> str:
    """The full address of the command's reference entry."""
    return f"{DOCS_URL}{reference_page(path)}#{reference_anchor(path)}"


def add_docs_links(command: click.Command, path: tuple[str, ...] = ()) -> None:
    """End the help of command and every subcommand with the address of its reference entry."""
    command.epilog = f"\b\nReference: {reference_url(path)}"  # \b: click must not wrap the URL
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            add_docs_links(sub, (*path, name))
