"""Checkpoints: watch a training directory and push each complete checkpoint with lineage,
keep the newest and the best, and restore the latest for training to resume.

    watcher = Watcher(registries, WatchConfig(directory=..., repository=..., run_id=...))
    watcher.run(stop)                                     # until stop is set, then a final scan
    restore_latest(registries, repository=..., directory=...)   # before training starts
"""

from trainops.checkpoint.catalog import CheckpointInfo, latest_checkpoint, list_checkpoints
from trainops.checkpoint.layouts import LAYOUT_NAMES
from trainops.checkpoint.restore import RestoreResult, restore_latest, restore_ref
from trainops.checkpoint.retention import apply_retention, plan_retention
from trainops.checkpoint.watch import PushedCheckpoint, WatchConfig, Watcher, WatchEvent, WatchResult

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
