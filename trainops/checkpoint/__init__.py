"""Checkpoints: watch a training directory and push each complete checkpoint with lineage,
keep the newest and the best, and restore the latest for training to resume.

    watcher = Watcher(registries, WatchConfig(directory=..., repository=..., run_id=...))
    watcher.run(stop)                                     # until stop is set, then a final scan
    restore_latest(registries, repository=..., directory=...)   # before training starts
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainops.checkpoint.catalog import CheckpointInfo, latest_checkpoint, list_checkpoints
    from trainops.checkpoint.layouts import LAYOUT_NAMES
    from trainops.checkpoint.restore import RestoreResult, restore_latest, restore_ref
    from trainops.checkpoint.retention import apply_retention, plan_retention
    from trainops.checkpoint.watch import PushedCheckpoint, WatchConfig, Watcher, WatchEvent, WatchResult

# Each name loads its module on first use: `ckpt latest` needs the catalog, not the
# watcher, retention and the manifest models they bring.
_HOMES = {
    "CheckpointInfo": "catalog",
    "latest_checkpoint": "catalog",
    "list_checkpoints": "catalog",
    "LAYOUT_NAMES": "layouts",
    "RestoreResult": "restore",
    "restore_latest": "restore",
    "restore_ref": "restore",
    "apply_retention": "retention",
    "plan_retention": "retention",
    "PushedCheckpoint": "watch",
    "WatchConfig": "watch",
    "WatchEvent": "watch",
    "WatchResult": "watch",
    "Watcher": "watch",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"trainops.checkpoint.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LAYOUT_NAMES",
    "CheckpointInfo",
    "PushedCheckpoint",
    "RestoreResult",
    "WatchConfig",
    "WatchEvent",
    "WatchResult",
    "Watcher",
    "apply_retention",
    "latest_checkpoint",
    "list_checkpoints",
    "plan_retention",
    "restore_latest",
    "restore_ref",
]
