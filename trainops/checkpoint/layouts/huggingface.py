"""Hugging Face Trainer layout: `checkpoint-N/` with trainer_state.json written last.

There is no commit marker: a checkpoint is committed once its trainer_state.json is a
whole JSON object, and complete once it has also settled (nothing changed for a while),
a newer checkpoint exists, or the Trainer has exited. `tmp-checkpoint-*` are staging dirs.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainops.checkpoint.layouts.base import Found, Layout, Listing, entries, numbered_dirs
from trainops.checkpoint.metrics import STATE_FILE, read_json_object

CHECKPOINT_DIR = re.compile(r"^checkpoint-([0-9]+)$")
STAGING_DIR = re.compile(r"^tmp-checkpoint-([0-9]+)$")


class HuggingFaceLayout(Layout):
    name = "huggingface"

    def claims(self, names: set[str]) -> bool:
        return any(CHECKPOINT_DIR.match(n) or STAGING_DIR.match(n) for n in names)

    def listing(self, directory: Path) -> Listing:
        found = [
            Found(name, path, step, committed=read_json_object(path / STATE_FILE) is not None, needs_settle=True)
            for step, name, path in numbered_dirs(directory, CHECKPOINT_DIR)
        ]
        staging = any(STAGING_DIR.match(e.name) for e in entries(directory))
        return Listing(found, staging or any(not f.committed for f in found))

    def default_name(self, step: int) -> str:
        return f"checkpoint-{step}"

    def step_of(self, name: str) -> int | None:
        match = CHECKPOINT_DIR.match(name)
        return int(match.group(1)) if match else None
