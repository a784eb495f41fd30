"""trainops layout (the tiny-llm example): `step-NNNNNN/`, written in a `.tmp-*` sibling and
renamed into place, so a directory under its final name is complete."""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainops.checkpoint.layouts.base import Found, Layout, Listing, numbered_dirs

STEP_DIR = re.compile(r"^step-([0-9]+)$")
TEMP_PREFIX = ".tmp-"


class TrainopsLayout(Layout):
    name = "trainops"

    def claims(self, names: set[str]) -> bool:
        return any(STEP_DIR.match(n) for n in names)

    def listing(self, directory: Path) -> Listing:
        found = [Found(name, path, step, committed=True) for step, name, path in numbered_dirs(directory, STEP_DIR)]
        try:
            writing = any(n.startswith(TEMP_PREFIX) for n in os.listdir(directory))
        except FileNotFoundError:
            writing = False
        return Listing(found, writing)

    def default_name(self, step: int) -> str:
        return f"step-{step:06d}"

    def step_of(self, name: str) -> int | None:
        match = STEP_DIR.match(name)
        return int(match.group(1)) if match else None
