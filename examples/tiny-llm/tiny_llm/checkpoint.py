"""Atomic checkpoint directories.

Layout::

    $TRAINOPS_CKPT_DIR/
      step-000500/
        model.safetensors      weights (+ metadata: vocab, shape)
        optimizer.safetensors  Adam first/second moments
        trainer_state.json     step, metrics, run_id, resumed_from, config, rng

A checkpoint is written into a sibling ``.tmp-*`` directory, every file and the directory
are fsynced, and only then is it renamed to ``step-NNNNNN``. A directory whose name
matches ``step-*`` is therefore always complete; leftovers of a killed writer are
``.tmp-*`` directories, which :func:`remove_stale_temp_dirs` deletes on the next start.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from .model import Array, Params

log = logging.getLogger("tiny_llm")

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
REQUIRED_FILES = (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE)
TEMP_PREFIX = ".tmp-"
FORMAT_VERSION = 1
_STEP_RE = re.compile(r"^step-(\d+)$")


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def step_of(path: Path) -> int | None:
    match = _STEP_RE.match(path.name)
    return int(match.group(1)) if match else None


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """``step-*`` directories in ``ckpt_dir``, oldest first (by step number)."""
    if not ckpt_dir.is_dir():
        return []
    found = [(s, p) for p in ckpt_dir.iterdir() if p.is_dir() and (s := step_of(p)) is not None]
    return [p for _, p in sorted(found)]


def remove_stale_temp_dirs(ckpt_dir: Path) -> list[str]:
    removed: list[str] = []
    if not ckpt_dir.is_dir():
        return removed
    for entry in ckpt_dir.iterdir():
        if entry.name.startswith(TEMP_PREFIX):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Checkpoint:
    path: Path
    params: Params
    optimizer: dict[str, Array]
    state: dict[str, Any]
    metadata: dict[str, str]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def step(self) -> int:
        return int(self.state["step"])

    @property
    def vocab(self) -> list[str]:
        vocab: list[str] = json.loads(self.metadata["vocab"])
        return vocab


def save_checkpoint(
    ckpt_dir: Path,
    step: int,
    params: Params,
    optimizer: dict[str, Array],
    state: dict[str, Any],
    metadata: dict[str, str],
) -> Path:
    """Write ``step-NNNNNN`` atomically and return its path."""
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    final = ckpt_dir / checkpoint_name(step)
    tmp = ckpt_dir / f"{TEMP_PREFIX}{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        meta = {"format": "np", "tiny_llm_format": str(FORMAT_VERSION), **metadata}
        save_file(params, str(tmp / MODEL_FILE), metadata=meta)
        save_file(optimizer, str(tmp / OPTIMIZER_FILE))
        with open(tmp / STATE_FILE, "w", encoding="utf-8") as fh:
            json.dump(state, fh, indent=2, sort_keys=True)
            fh.write("\n")
        file_mode = 0o666 & ~_current_umask()  # safetensors creates its files 0600
        for name in REQUIRED_FILES:
            os.chmod(tmp / name, file_mode)
            _fsync_path(tmp / name)
        _fsync_path(tmp)
        if final.exists():
            # Same step written again (e.g. a re-run that was told to stop here): swap the
            # old copy out of the ``step-*`` namespace first so the name never dangles.
            old = ckpt_dir / f"{TEMP_PREFIX}old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_path(ckpt_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_checkpoint(path: Path) -> Checkpoint:
    """Load and validate one checkpoint directory; raises ``ValueError`` if incomplete."""
    missing = [n for n in REQUIRED_FILES if not (path / n).is_file()]
    if missing:
        raise ValueError(f"{path} is missing {', '.join(missing)}")
    try:
        with safe_open(str(path / MODEL_FILE), framework="np") as fh:
            metadata = dict(fh.metadata() or {})
        model = load_file(path / MODEL_FILE)
        moments = load_file(path / OPTIMIZER_FILE)
        state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except OSError:
        raise
    except Exception as exc:  # SafetensorError and JSONDecodeError have no common base
        raise ValueError(f"{path} is corrupt: {exc}") from exc
    if "vocab" not in metadata:
        raise ValueError(f"{path / MODEL_FILE} has no vocab metadata")
    params = {k: np.array(v, dtype=np.float32) for k, v in model.items()}
    optimizer = {k: np.array(v, dtype=np.float32) for k, v in moments.items()}
    if not isinstance(state, dict):
        raise ValueError(f"{path / STATE_FILE} is not a JSON object")
    for key in ("step", "config", "rng"):
        if key not in state:
            raise ValueError(f"{path / STATE_FILE} has no {key!r}")
    return Checkpoint(path, params, optimizer, state, metadata)


def load_latest(ckpt_dir: Path) -> Checkpoint | None:
    """The newest loadable checkpoint in ``ckpt_dir``; unreadable ones are skipped with a
    warning (they cannot come from this writer, but the directory may be shared)."""
    for path in reversed(list_checkpoints(ckpt_dir)):
        try:
            return load_checkpoint(path)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("skipping unreadable checkpoint %s: %s", path.name, exc)
    return None
