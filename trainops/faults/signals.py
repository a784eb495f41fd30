"""What a failure looks like: the fault classes, the NVIDIA Xid table, and the patterns that
turn one line of evidence (the trainer's output, a kernel message, a DCGM report, a metrics
line) into a classified signal.

Nothing here reads files or runs anything: `classify_line` is a pure function of a line and
its source, so the detector, the drills and the tests all share one reading of the evidence.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Literal, get_args

from trainops.faults.catalog import XIDS
from trainops.manifest.faults import FaultClass

FAULT_CLASSES: tuple[str, ...] = get_args(FaultClass)

# cluster: the API server; nccl: the NCCL Inspector's output, PyTorch's flight recorder
Source = Literal["trainer", "node-health", "metrics", "exit", "progress", "cluster", "nccl"]

# When several signals arrive for one failure (a GPU falls off the bus, then NCCL times out
# and the trainer dies), the diagnosis is the most specific cause: hardware first, then the
# node, then what the application did, then the symptoms every failure shares.
PRIORITY: tuple[str, ...] = (
    "fell-off-bus",
    "ecc-uncorrectable",
    "row-remap-failed",
    "row-remap-pending",
    "nvlink",
    "ecc-contained",
    "xid-application",
    "node-lost",
    "task-killed",
    "slow-node",
    "cuda-oom",
    "nan-loss",
    "storage-error",
    "segfault",
    "nccl-timeout",
    "hang",
    "code-error",
    "unschedulable",
)


@dataclass(frozen=True)
class XidClass:
    fault: FaultClass
    meaning: str


# NVIDIA's Xid catalogue, the entries that decide what to do with a training job
# (trainops.faults.catalog: with NVIDIA's resolution bucket of each).
XID_TABLE: dict[int, XidClass] = {e.xid: XidClass(e.fault, e.meaning) for e in XIDS}

MEANINGS: dict[str, str] = {
    "nccl-timeout": "an NCCL collective timed out (watchdog or flight-recorder dump)",
    "hang": "no progress (heartbeat, checkpoint or metrics) within faultTolerance.hangTimeout",
    "storage-error": "a storage error while writing a checkpoint",
    "segfault": "the trainer crashed (segmentation fault)",
    "xid-application": "an application Xid (8/13/31/43/45)",
    "ecc-contained": "a contained ECC error (Xid 94)",
    "node-lost": "the node or its processes were lost (killed, node failure)",
    "slow-node": "a rank's steps stayed slower than its peers' (a throttled GPU, a flapping link, a noisy neighbour)",
    "task-killed": "the trainer was killed (SIGKILL: the OOM killer, an operator) on a node that still answers",
    "nvlink": "an NVLink error (Xid 74)",
    "row-remap-pending": "a GPU row remapping is pending (Xid 63): the GPU needs a reset",
    "row-remap-failed": "a GPU row remapping failed (Xid 64)",
    "ecc-uncorrectable": "an uncorrectable ECC error (Xid 48/92/95, DCGM)",
    "fell-off-bus": "a GPU fell off the bus (Xid 79)",
    "cuda-oom": "CUDA out of memory",
    "nan-loss": "the loss became NaN or infinite",
    "code-error": "the trainer failed (a Python exception or a non-zero exit)",
    "unschedulable": "after a requeue the job can start nowhere (its node exclusions leave no node it can run on)",
}


@dataclass(frozen=True)
class Signal:
    """One piece of evidence, classified."""

    fault: FaultClass
    source: Source
    line: str
    node: str | None = None
    detail: str | None = None  # the Xid's meaning, the metric that went non-finite, …


_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")
_SRUN_NODE = re.compile(r"srun: error: (?:Node failure on )?([A-Za-z0-9._-]+)(?:: task [0-9-]+)?")

# (pattern, class) in the order tried; the first that matches classifies the line.
_TRAINER_PATTERNS: tuple[tuple[re.Pattern[str], FaultClass], ...] = (
    (
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"),
        "cuda-oom",
    ),
    (
        re.compile(r"Watchdog caught collective operation timeout|NCCL.*[Tt]imeout|ProcessGroupNCCL.*timed out"),
        "nccl-timeout",
    ),
    (
        re.compile(r"TORCH_NCCL_.*(dump|DEBUG_INFO)|[Ff]light ?[Rr]ecorder.*dump|Dumping .*flight recorder"),
        "nccl-timeout",
    ),
    (re.compile(r"uncorrectable ECC|ECC error.*uncorrect|DCGM_FR_(VOLATILE|SBE|DBE)_?(DBE|SBE)?"), "ecc-uncorrectable"),
    (re.compile(r"non-finite (training )?loss|loss (is|became) (nan|NaN|inf)"), "nan-loss"),
    (
        re.compile(
            r"No space left on device|Disk quota exceeded|Stale file handle|Input/output error|"
            r"Read-only file system|(checkpoint|save).*(OSError|IOError|EIO|ENOSPC)"
        ),
        "storage-error",
    ),
    (re.compile(r"Segmentation fault|SIGSEGV|signal 11\b"), "segfault"),
    (re.compile(r"srun: error: Node failure|srun: error: .*: task [0-9-]+: Killed|NODE_FAIL"), "node-lost"),
)

# srun's line for a task that was killed: a lost node, unless the scheduler's own signal (time
# limit, preemption, cancel) was passed on to the trainer, whose stop kills the task too.
SRUN_TASK_KILLED = re.compile(r"srun: error: .*: task [0-9-]+: Killed")

_HEALTH_PATTERNS: tuple[tuple[re.Pattern[str], FaultClass], ...] = (
    (re.compile(r"DCGM_FR_NVLINK|NVLink.*(error|down|inactive)", re.IGNORECASE), "nvlink"),
    (re.compile(r"DCGM_FR_ROW_REMAP_FAILURE|row remap(ping)? fail", re.IGNORECASE), "row-remap-failed"),
    (re.compile(r"DCGM_FR_PENDING_ROW_REMAP|pending row remap", re.IGNORECASE), "row-remap-pending"),
    (re.compile(r"DCGM_FR_FALLEN_OFF_BUS|fallen off the bus", re.IGNORECASE), "fell-off-bus"),
    (
        re.compile(r"DCGM_FR_(VOLATILE_DBE|RETIRED_PAGES|UNCONTAINED)|uncorrectable ECC|double.bit ECC", re.IGNORECASE),
        "ecc-uncorrectable",
    ),
)

LOSS_KEYS = ("loss", "train_loss", "val_loss", "eval_loss")


def xid_signal(line: str, *, node: str | None) -> Signal | None:
    """An `NVRM: Xid (PCI:…): N, …` kernel message, classified by XID_TABLE (unknown Xids: None)."""
    match = _XID.search(line)
    if match is None:
        return None
    number = int(match.group(2))
    entry = XID_TABLE.get(number)
    if entry is None:
        return None
    return Signal(entry.fault, "node-health", line, node, f"Xid {number}: {entry.meaning}")


def classify_line(line: str, *, source: Source, node: str | None = None) -> Signal | None:
    """The signal a line of evidence carries, or None for an ordinary line."""
    text = line.rstrip("\n")
    if source == "node-health":
        found = xid_signal(text, node=node)
        if found is not None:
            return found
        for pattern, fault in _HEALTH_PATTERNS:
            if pattern.search(text):
                return Signal(fault, source, text, node, MEANINGS[fault])
        return None
    if "NVRM: Xid" in text:
        return xid_signal(text, node=node)
    for pattern, fault in _TRAINER_PATTERNS:
        if pattern.search(text):
            lost = _SRUN_NODE.search(text) if fault == "node-lost" else None
            return Signal(fault, source, text, lost.group(1) if lost else node, MEANINGS[fault])
    return None


@dataclass(frozen=True)
class Progress:
    """A step the trainer reported on its metrics line (one rank's, with `rank`)."""

    step: int
    losses: dict[str, float]
    rank: int | None = None
    node: str | None = None
    final: bool = False  # the rank's last line: it finished (`"final": true`)


def metrics_line(line: str) -> Progress | None:
    """A trainer's JSON metrics line (`{"step": 300, "train_loss": 1.9, …}`), or None.

    Python's json writes NaN and Infinity as bare words, which json.loads reads back; a loss
    written as null by a trainer that cleans non-finite values is not a number and is skipped.
    """
    text = line.strip()
    if not (text.startswith("{") and '"step"' in text):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    step = data.get("step") if isinstance(data, dict) else None
    if isinstance(step, bool) or not isinstance(step, int):
        return None
    losses = {
        key: float(value)
        for key, value in data.items()
        if key in LOSS_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    rank, node = data.get("rank"), data.get("node")
    return Progress(
        step=step,
        losses=losses,
        rank=rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None,
        node=node if isinstance(node, str) and node else None,
        final=data.get("final") is True,
    )


def nan_signal(progress: Progress, line: str, *, node: str | None) -> Signal | None:
    """NaN or infinite loss on a metrics line."""
    for key, value in progress.losses.items():
        if not math.isfinite(value):
            return Signal("nan-loss", "metrics", line.strip(), node, f"{key} is {value} at step {progress.step}")
    return None


def exit_signal(code: int, *, node: str | None) -> Signal:
    """What a trainer's exit status alone says, when no line said more."""
    if code in (139, -11):
        return Signal("segfault", "exit", f"the trainer exited {code}", node, MEANINGS["segfault"])
    if code in (137, -9):
        return Signal("node-lost", "exit", f"the trainer was killed (exit {code})", node, MEANINGS["node-lost"])
    return Signal("code-error", "exit", f"the trainer exited {code}", node, MEANINGS["code-error"])


def most_specific(signals: list[Signal]) -> Signal | None:
    """The signal that names the cause (PRIORITY), the earliest of its class."""
    if not signals:
        return None
    return min(signals, key=lambda s: PRIORITY.index(s.fault))
