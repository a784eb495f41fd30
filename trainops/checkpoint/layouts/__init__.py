"""Checkpoint layouts by name, and detection of the layout of a directory."""

from __future__ import annotations

from pathlib import Path

from trainops.checkpoint.layouts.base import Found, Layout, Listing, entries
from trainops.checkpoint.layouts.dcp import DcpLayout, is_dcp
from trainops.checkpoint.layouts.deepspeed import DeepSpeedLayout
from trainops.checkpoint.layouts.huggingface import HuggingFaceLayout
from trainops.checkpoint.layouts.megatron import MegatronLayout
from trainops.checkpoint.layouts.trainops import TrainopsLayout
from trainops.errors import InputError

LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (TrainopsLayout(), HuggingFaceLayout(), MegatronLayout(), DeepSpeedLayout(), DcpLayout())
}
LAYOUT_NAMES = ("auto", *LAYOUTS)


def get_layout(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise InputError(f"unknown checkpoint layout {name!r}", hint=f"use one of {', '.join(LAYOUT_NAMES)}") from None


def detect_layout(directory: Path) -> Layout | None:
    """The layout a directory's top-level entries show, or None while it holds none yet."""
    names = {e.name for e in entries(directory)}
    claimed = [layout for layout in LAYOUTS.values() if layout.claims(names)]
    if [c.name for c in claimed] == ["trainops"] and is_dcp(directory, names):
        return LAYOUTS["dcp"]  # step-N/ directories holding a DCP .metadata and shards
    if len(claimed) > 1:
        raise InputError(
            f"{directory} looks like more than one checkpoint layout ({', '.join(c.name for c in claimed)})",
            hint="pass --layout (or set train.checkpoint.layout) to say which",
        )
    return claimed[0] if claimed else None


def resolve_layout(name: str, directory: Path) -> Layout | None:
    """A named layout, or (for auto) the detected one; None if auto finds nothing yet."""
    return detect_layout(directory) if name == "auto" else get_layout(name)


__all__ = ["LAYOUTS", "LAYOUT_NAMES", "Found", "Layout", "Listing", "detect_layout", "get_layout", "resolve_layout"]
