"""Diagnosis → action: the defaults that match practice, and the manifest's overrides.

- restart: the fault is transient (an NCCL timeout, a hang, a contained ECC error): restart
  the trainer in place, inside the same allocation, from the newest complete checkpoint (a
  killed task (trainops.faults.verify: the node still answers, too);
- requeue: the node is at fault but may recover (an NVLink error, a pending row remap, a
  lost node): exclude the node and put the job back in the queue;
- drain: the hardware is broken (a GPU off the bus, an uncorrectable ECC error): drain the
  node with the diagnosis as its reason, then exclude it and requeue;
- stop: retrying wastes GPUs (CUDA out of memory, NaN loss, a code error): fail the run
  with the diagnosis in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from trainops.errors import InputError
from trainops.faults.catalog import XIDS, Bucket, XidEntry, entries
from trainops.faults.signals import FAULT_CLASSES, MEANINGS

if TYPE_CHECKING:
    from trainops.manifest.faults import FaultPolicy

Action = Literal["restart", "requeue", "drain", "stop"]

DEFAULT_ACTIONS: dict[str, Action] = {
    "nccl-timeout": "restart",
    "hang": "restart",
    "storage-error": "restart",
    "segfault": "restart",
    "xid-application": "restart",
    "ecc-contained": "restart",
    "node-lost": "requeue",
    "task-killed": "restart",
    "slow-node": "requeue",
    "nvlink": "requeue",
    "row-remap-pending": "requeue",
    "row-remap-failed": "drain",
    "ecc-uncorrectable": "drain",
    "fell-off-bus": "drain",
    "cuda-oom": "stop",
    "nan-loss": "stop",
    "code-error": "stop",
    "unschedulable": "stop",  # recorded, nothing undone: a person clears the exclusion once the nodes are sound
}


def action_for(fault: str, policy: FaultPolicy | None) -> Action:
    """The manifest's action for a fault class, else the default."""
    if policy is not None and fault in policy.actions:
        return policy.actions[fault]
    return DEFAULT_ACTIONS[fault]


@dataclass(frozen=True)
class ClassRow:
    """One class of `trainops incidents classes`: the action it gets, and what the knowledge
    base (trainops.faults.catalog) says of it."""

    fault: str
    action: Action
    default: Action
    meaning: str
    bucket: Bucket  # what resolves it (NVIDIA's resolution buckets, folded)
    xids: list[XidEntry]
    health: list[str]  # DCGM health-watch failures that name it
    counters: list[str]  # DCGM fields whose rise comes before it
    lines: list[str]  # what the trainer, NCCL, srun or the kernel write


def action_table(policy: FaultPolicy | None) -> list[ClassRow]:
    return [
        ClassRow(
            e.fault,
            action_for(e.fault, policy),
            DEFAULT_ACTIONS[e.fault],
            MEANINGS[e.fault],
            e.bucket,
            [x for x in XIDS if x.xid in e.xids],
            e.health,
            e.counters,
            e.lines,
        )
        for e in entries(FAULT_CLASSES)
    ]


def class_row(fault: str, policy: FaultPolicy | None) -> ClassRow:
    """One class of the table; an unknown class is bad input."""

    found = [r for r in action_table(policy) if r.fault == fault]
    if not found:
        raise InputError(f"unknown fault class {fault!r}", hint=f"use one of {', '.join(FAULT_CLASSES)}")
    return found[0]
