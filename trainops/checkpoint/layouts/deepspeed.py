"""DeepSpeed layout: tag directories (`global_stepN/` by default) and a `latest` file that
names the newest complete tag, written once every rank has saved. Tags with a step up to
the one `latest` names are complete."""

from __future__ import annotations

import re
from pathlib import Path

from trainops.checkpoint.layouts.base import Found, Layout, Listing, numbered_dirs, read_small_text, write_atomic

LATEST = "latest"
DEFAULT_PREFIX = "global_step"
TAG_STEP = re.compile(r"^(.*?)([0-9]+)$")


def _pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(prefix)}([0-9]+)$")


class DeepSpeedLayout(Layout):
    name = "deepspeed"

    def claims(self, names: set[str]) -> bool:
        return LATEST in names or any(_pattern(DEFAULT_PREFIX).match(n) for n in names)

    def listing(self, directory: Path) -> Listing:
        tag = read_small_text(directory / LATEST)
        match = TAG_STEP.match(tag) if tag else None
        prefix, mark = (match.group(1), int(match.group(2))) if match else (DEFAULT_PREFIX, None)
        found = [
            Found(name, path, step, committed=mark is not None and step <= mark)
            for step, name, path in numbered_dirs(directory, _pattern(prefix))
        ]
        return Listing(found, any(not f.committed for f in found))

    def default_name(self, step: int) -> str:
        return f"{DEFAULT_PREFIX}{step}"

    def step_of(self, name: str) -> int | None:
        match = TAG_STEP.match(name)
        return int(match.group(2)) if match and match.group(1) else None

    def after_restore(self, directory: Path, name: str, step: int) -> None:
        write_atomic(directory / LATEST, name.encode())
