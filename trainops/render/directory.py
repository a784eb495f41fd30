"""write_rendered: a rendered tree on disk, all or nothing (train render -o, rollout render -o)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from trainops.errors import ExistsError
from trainops.registry.artifact import safe_relpath
from trainops.render.model import RenderedFile

MARKER = ".trainops-rendered"


def write_rendered(
    out: Path, files: Iterable[RenderedFile], *, marker: str, executable: Callable[[str], bool] = lambda _: False
) -> list[str]:
    """Replace `out` with the files (paths relative to it); the relative paths written, sorted.

    `out` must be new, empty, or a tree trainops rendered before (it holds the marker file,
    whose text is `marker`); it is replaced as a whole, so files of an earlier render that
    this one lacks go away. Paths that would escape `out` are refused.
    """
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise ExistsError(f"{out} exists and was not rendered by trainops", hint="pick a new or empty directory for -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        names = []
        for item in files:
            rel = safe_relpath(item.path, "rendered file")
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(item.text, encoding="utf-8")
            if executable(rel):
                target.chmod(0o755)
            names.append(rel)
        (staging / MARKER).write_text(marker, encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return sorted(names)
