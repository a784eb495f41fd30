"""What the watcher remembers in the watched directory, under `.trainops/`:

    pushed.json    checkpoint name → digest, reference and fingerprint, for each push
    restored.json  the checkpoint `restore` put here (the one training resumes from)
    lock           held during a scan or a restore's final moves, so two processes
                   never publish or rewrite the same directory at once

Both JSON files are replaced atomically. A fingerprint is the sha256 of every file's
relative path, size and mtime: a checkpoint rewritten under the same name changes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainops.checkpoint.layouts.base import write_atomic
from trainops.errors import InputError

STATE_DIR = ".trainops"
PUSHED_FILE = "pushed.json"
RESTORED_FILE = "restored.json"
LOCK_FILE = "lock"
VERSION = 1


@dataclass(frozen=True)
class Fingerprint:
    digest: str
    files: int


def fingerprint(path: Path) -> Fingerprint:
    """Relative paths, sizes and mtimes of the files under path (file symlinks followed,
    directory symlinks not entered: what a push would send)."""
    lines: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue  # a dangling link, or removed while we looked
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = os.path.relpath(full, path).replace(os.sep, "/")
            lines.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n")
    if not lines and not path.is_dir():
        raise FileNotFoundError(str(path))
    return Fingerprint("sha256:" + hashlib.sha256("".join(sorted(lines)).encode()).hexdigest(), len(lines))


def quick_key(path: Path) -> tuple[int, int]:
    """The directory's inode and mtime: changes when it is replaced or gains/loses entries."""
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


@dataclass(frozen=True)
class Record:
    """A checkpoint directory and the artifact it is in the registry."""

    name: str
    step: int
    repository: str  # repository URL
    digest: str
    ref: str  # repo:tag@digest
    fingerprint: str
    layout: str
    run_id: str | None = None
    quick: tuple[int, int] | None = None
    at: str | None = None
    partial: bool = False  # a rank's share only (restore --rank): never the whole checkpoint

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["quick"] = list(self.quick) if self.quick else None
        return data

    @classmethod
    def from_json(cls, data: Any) -> Record | None:
        if not isinstance(data, dict):
            return None
        try:
            quick = data.get("quick")
            return cls(
                name=str(data["name"]),
                step=int(data["step"]),
                repository=str(data["repository"]),
                digest=str(data["digest"]),
                ref=str(data["ref"]),
                fingerprint=str(data["fingerprint"]),
                layout=str(data.get("layout") or ""),
                run_id=data.get("run_id"),
                quick=(int(quick[0]), int(quick[1])) if isinstance(quick, list) and len(quick) == 2 else None,
                at=data.get("at"),
                partial=data.get("partial") is True,
            )
        except (KeyError, TypeError, ValueError):
            return None


def _state_dir(directory: Path) -> Path:
    return directory / STATE_DIR


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # unreadable: start afresh (the watcher adopts what the registry has)


def load_pushed(directory: Path) -> dict[str, Record]:
    data = _read(_state_dir(directory) / PUSHED_FILE)
    raw = data.get("checkpoints") if isinstance(data, dict) else None
    out: dict[str, Record] = {}
    for item in (raw or {}).values() if isinstance(raw, dict) else []:
        record = Record.from_json(item)
        if record is not None:
            out[record.name] = record
    return out


def save_pushed(directory: Path, records: dict[str, Record]) -> None:
    body = {"version": VERSION, "checkpoints": {n: r.as_json() for n, r in sorted(records.items())}}
    _write(directory, PUSHED_FILE, body)


def load_restored(directory: Path) -> Record | None:
    return Record.from_json(_read(_state_dir(directory) / RESTORED_FILE))


def save_restored(directory: Path, record: Record) -> None:
    _write(directory, RESTORED_FILE, {"version": VERSION, **record.as_json()})


def _write(directory: Path, name: str, body: dict[str, Any]) -> None:
    try:
        write_atomic(_state_dir(directory) / name, json.dumps(body, indent=2, sort_keys=True).encode() + b"\n")
    except OSError as err:
        raise InputError(
            f"cannot write {_state_dir(directory) / name}: {err.strerror}",
            hint="the checkpoint directory must be writable by trainops",
        ) from None


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on the directory's state (blocks while another process holds it)."""
    path = _state_dir(directory) / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise InputError(
            f"cannot create {path}: {err.strerror}", hint="the checkpoint directory must be writable by trainops"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:
            if err.errno not in (errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOLCK):
                raise
            # A filesystem without flock (Lustre mounted without -o flock): go on unlocked.
        yield
    finally:
        os.close(fd)  # closing releases the lock
