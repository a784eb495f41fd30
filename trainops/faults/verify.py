"""Check before excluding: what the scheduler says of a node before a job is sent away from it.

An exit status of 137 or srun's "task 0: Killed" says the trainer was killed, not that its
node was lost: the kernel's OOM killer, an operator's `kill -9` or a crashing launcher leave
the same trace on a healthy node. Excluding that node is harmless on a large partition and
fatal on a small one: a job whose exclusions cover every node it may run on pends forever
(Slurm: Reason=BadConstraints). So before a requeue or a drain is carried out the executor's
probe asks the scheduler (Slurm: the node's state through scontrol/sinfo), and:

- a `node-lost` on a node that still answers is `task-killed`: restarted in place;
- an exclusion that would leave fewer nodes than the job needs is not made: a `requeue`
  becomes a restart in place with the node flagged, a `drain` (broken hardware, restarting
  there is pointless) stops the run with the diagnosis and the node flagged for a person;
- a probe that cannot answer (the scheduler unreachable, a node name it does not know)
  changes nothing: a warning, and the action the diagnosis gave.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainops.faults.actions import Action, action_for
from trainops.faults.signals import MEANINGS

if TYPE_CHECKING:
    from trainops.faults.detect import Diagnosis
    from trainops.manifest.faults import FaultPolicy

EXCLUDING: tuple[str, ...] = ("requeue", "drain")


@dataclass(frozen=True)
class NodeCheck:
    """The scheduler's word on one node of a failed job."""

    node: str
    answers: bool  # the scheduler reaches it (slurmd responding, not down)
    state: str  # in the scheduler's words (Slurm: ALLOCATED, IDLE+DRAIN, DOWN*, …)
    left: int | None  # nodes the job could still run on with this one excluded too (None: not known)
    needed: int  # nodes the job needs

    @property
    def last(self) -> bool:
        """Excluding this node leaves the job fewer nodes than it needs."""
        return self.left is not None and self.left < self.needed


NodeProbe = Callable[[str], NodeCheck]


def reclassify(diagnosis: Diagnosis, check: NodeCheck, policy: FaultPolicy | None) -> Diagnosis:
    """A node-lost on a node that answers is a killed task (the node stays in use)."""
    if diagnosis.fault != "node-lost" or not check.answers:
        return diagnosis
    said = f"{check.node} answers the scheduler (State={check.state}): the trainer was killed, the node is not lost"
    return dataclasses.replace(
        diagnosis,
        fault="task-killed",
        action=action_for("task-killed", policy),
        detail=f"{MEANINGS['task-killed']}; {said}",
        evidence=[*diagnosis.evidence, f"scheduler: node {check.node} State={check.state}"],
    )


def keep_schedulable(action: Action, check: NodeCheck) -> tuple[Action, str] | None:
    """None when excluding the node leaves the job somewhere to run; else the action instead,
    and why (the node is flagged either way)."""
    if action not in EXCLUDING or not check.last:
        return None
    room = f"{check.left} other usable node(s), the job needs {check.needed}"
    if action == "requeue":
        return "restart", f" (excluding {check.node} would leave {room}: restarted in place instead, node flagged)"
    return "stop", (
        f" ({check.node} is the last node the job can run on ({room}): stopped instead of drained and requeued; "
        f"drain and repair it once the job is gone)"
    )
