"""What a checkpoint layout tells the watcher: which directories are checkpoints, their
steps, and whether the writer has committed each one."""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from trainops.checkpoint.metrics import read_metrics


@dataclass(frozen=True)
class Found:
    """A checkpoint directory in the watched directory.

    committed: the layout's commit rule holds (marker written, rename done, state file
    whole). needs_settle: the layout has no commit marker, so a committed directory is
    complete only once nothing in it has changed for a while, a newer one exists, or the
    writer has exited.
    """

    name: str
    path: Path
    step: int
    committed: bool
    needs_settle: bool = False


@dataclass(frozen=True)
class Listing:
    found: list[Found] = field(default_factory=list)
    writing: bool = False  # a write looks under way (temporary dir, uncommitted newest)


class Layout(ABC):
    """One checkpoint layout (trainops, huggingface, megatron, deepspeed)."""

    name: str = ""

    @abstractmethod
    def claims(self, names: set[str]) -> bool:
        """Whether a directory with these top-level entries looks like this layout."""

    @abstractmethod
    def listing(self, directory: Path) -> Listing:
        """The checkpoint directories, oldest first."""

    @abstractmethod
    def default_name(self, step: int) -> str:
        """The directory name this layout's writer gives the checkpoint at step."""

    @abstractmethod
    def step_of(self, name: str) -> int | None:
        """The step a checkpoint directory name says, or None if it is not one of ours."""

    def metrics(self, path: Path) -> dict[str, float]:
        return read_metrics(path)

    def after_restore(self, directory: Path, name: str, step: int) -> None:  # noqa: B027 - optional hook
        """Record a restored checkpoint the way the writer does (tracker files)."""


def entries(directory: Path) -> list[os.DirEntry[str]]:
    """Top-level entries, hidden ones (ours, staging dirs) left out."""
    try:
        with os.scandir(directory) as it:
            return [e for e in it if not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def numbered_dirs(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, str, Path]]:
    """(step, name, path) of the subdirectories whose name matches pattern (group 1 = step)."""
    out: list[tuple[int, str, Path]] = []
    for entry in entries(directory):
        match = pattern.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            out.append((int(match.group(1)), entry.name, Path(entry.path)))
    return sorted(out)


def read_small_text(path: Path, limit: int = 4096) -> str | None:
    """A small marker file's stripped text, or None if it is missing or unreadable."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so a reader sees the old content or the new, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.trainops-{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
