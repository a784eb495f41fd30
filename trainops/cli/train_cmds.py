"""Placeholder: filled in by issue 5 work."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
