"""Where the project is: the trainops.yaml a command reads, found as git finds `.git`.

`-f FILE` names it; without it, the current directory's trainops.yaml, else the nearest
parent directory's (so `trainops ckpt ls` works from `src/` of a project). The search stops
at the filesystem root, and at a directory listed in $TRAINOPS_CEILING_DIRECTORIES
(colon-separated, as git's GIT_CEILING_DIRECTORIES), which is not searched itself.

Nothing heavy is imported here: commands on the hot path (`registry ls`, `ckpt latest`)
look for the manifest before deciding whether they need pydantic at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainops.errors import NotFoundError

MANIFEST = "trainops.yaml"
CEILING_ENV = "TRAINOPS_CEILING_DIRECTORIES"


def find_manifest(start: Path | None = None) -> Path | None:
    """The nearest trainops.yaml from `start` (default: the current directory) upward; None if none."""
    here = (start or Path.cwd()).absolute()
    ceilings = {Path(p).absolute() for p in os.environ.get(CEILING_ENV, "").split(os.pathsep) if p}
    for directory in (here, *here.parents):
        if directory in ceilings:
            return None
        candidate = directory / MANIFEST
        if candidate.is_file():
            return candidate
    return None


def manifest_path(file: str | None) -> Path:
    """The manifest a command reads: FILE as given, else the one `find_manifest` finds.

    Raises NotFoundError (exit 4, the same for every command) when there is none."""
    if file:
        return Path(file)
    found = find_manifest()
    if found is None:
        raise NotFoundError(no_manifest(), hint="pass -f FILE, or create one with `trainops init`")
    return found


def shown(path: Path) -> str:
    """A path as a message shows it: relative to the current directory when it is below it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def no_manifest() -> str:
    """What every command says when it needs trainops.yaml and there is none."""
    return f"no {MANIFEST} in {Path.cwd()} or any parent directory"
