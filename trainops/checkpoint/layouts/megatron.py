"""Megatron-LM layout: `iter_NNNNNNN/` (or `release/`), committed once
latest_checkpointed_iteration.txt, which Megatron writes after every rank has saved,
names that iteration or a later one."""

from __future__ import annotations

import re
from pathlib import Path

from trainops.checkpoint.layouts.base import Found, Layout, Listing, numbered_dirs, read_small_text, write_atomic

ITER_DIR = re.compile(r"^iter_([0-9]+)$")
TRACKER = "latest_checkpointed_iteration.txt"
RELEASE = "release"


def tracker_value(directory: Path) -> int | str | None:
    """The tracker's iteration, "release", or None (missing, torn or unreadable)."""
    text = read_small_text(directory / TRACKER)
    if text is None:
        return None
    if text == RELEASE:
        return RELEASE
    return int(text) if text.isascii() and text.isdigit() else None


class MegatronLayout(Layout):
    name = "megatron"

    def claims(self, names: set[str]) -> bool:
        return TRACKER in names or any(ITER_DIR.match(n) for n in names)

    def listing(self, directory: Path) -> Listing:
        mark = tracker_value(directory)
        found = [
            Found(name, path, step, committed=isinstance(mark, int) and step <= mark)
            for step, name, path in numbered_dirs(directory, ITER_DIR)
        ]
        release = directory / RELEASE
        if mark == RELEASE and release.is_dir() and not release.is_symlink():
            found.insert(0, Found(RELEASE, release, 0, committed=True))
        return Listing(found, any(not f.committed for f in found))

    def default_name(self, step: int) -> str:
        return f"iter_{step:07d}"

    def step_of(self, name: str) -> int | None:
        if name == RELEASE:
            return 0
        match = ITER_DIR.match(name)
        return int(match.group(1)) if match else None

    def after_restore(self, directory: Path, name: str, step: int) -> None:
        write_atomic(directory / TRACKER, (RELEASE if name == RELEASE else str(step)).encode())
