"""`train.faults`: what trainops does with each class of failure, and where it reads node health.

The fault classes and the default action of each live in trainops.faults (the room that
detects and acts); this module declares the manifest's shape only. An unknown class is a
validation error at its line, like any other unknown key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainops.manifest.common import Duration, StrictModel

FaultAction = Literal["restart", "requeue", "drain", "stop"]

# The classes of failure trainops tells apart (trainops.faults.signals diagnoses them).
FaultClass = Literal[
    "nccl-timeout",
    "hang",
    "storage-error",
    "segfault",
    "xid-application",
    "ecc-contained",
    "node-lost",
    "task-killed",
    "slow-node",
    "nvlink",
    "row-remap-pending",
    "row-remap-failed",
    "ecc-uncorrectable",
    "fell-off-bus",
    "cuda-oom",
    "nan-loss",
    "code-error",
    "unschedulable",
]


class NodeHealthSource(StrictModel):
    """A source of node-health lines: a file to follow (a kernel log standing for dmesg, a
    DCGM health export) or a command whose output is followed (`dmesg -w`, `journalctl -kf`).
    `{node}` in either is replaced by each node's name (one source per node of the job)."""

    file: str | None = Field(None, min_length=1, description="A file to follow from its end; `{node}`: per node.")
    command: list[str] | None = Field(None, min_length=1, description="A command whose output lines are followed.")
    kind: Literal["kernel", "dcgm"] = Field("kernel", description="What the lines are (for the incident's source).")

    @model_validator(mode="after")
    def _one_source(self) -> NodeHealthSource:
        if (self.file is None) == (self.command is None):
            raise ValueError("set exactly one of file or command")
        return self


class DrainAfter(StrictModel):
    """A node with this many incidents within the window is flagged for draining."""

    incidents: int = Field(3, ge=1)
    window: Duration = "24h"


class SlowNode(StrictModel):
    """When a slow rank's node is left (trainops.faults.straggler): a rank slower than its
    peers' median by `ratio` (and beyond their noise) is a straggler; its node is excluded
    once the run's time lost to it reaches `moveCost`, what a restart elsewhere costs."""

    ratio: float = Field(1.3, gt=1.0, description="Slower than the peers' median step time by this factor.")
    move_cost: Duration = Field("60s", description="Tolerate a straggler until it has cost this much run time.")
    progress_files: list[str] = Field(
        default_factory=list,
        description="Files (glob patterns) the ranks append their progress lines to, read beside the trainer's "
        'output: JSON lines {"step": N, "rank": R, "node": "…", "time": Unix seconds}.',
    )
    nccl_inspector: list[str] = Field(
        default_factory=list,
        description="The NCCL Inspector's files (glob patterns): its Prometheus files "
        "(<NCCL_INSPECTOR_DUMP_DIR>/nccl_inspector_metrics_*.prom) or its JSON-mode files "
        "(<NCCL_INSPECTOR_DUMP_DIR>/*-pid*.log): each rank's collectives, a second source of its progress, "
        "their bandwidth as evidence, and (JSON mode) which rank its peers wait for at each collective.",
    )


class FaultPolicy(StrictModel):
    """Diagnosis → action. `actions` overrides the defaults class by class: restart (in place,
    transient), requeue (exclude the node and requeue), drain (drain the node with the
    diagnosis as reason, then exclude and requeue), stop (fail with the diagnosis)."""

    actions: dict[FaultClass, FaultAction] = Field(
        default_factory=dict, description="Fault class → action, over the defaults (`trainops incidents classes`)."
    )
    node_health: list[NodeHealthSource] = Field(default_factory=list, description="Node-health sources to follow.")
    kill_after: Duration = Field("30s", description="After SIGTERM, how long a faulted trainer gets before SIGKILL.")
    drain_after: DrainAfter = Field(default_factory=DrainAfter)
    slow_node: SlowNode = Field(default_factory=SlowNode)
    flight_recorder: str | None = Field(
        None,
        min_length=1,
        description="PyTorch's flight-recorder dumps (a glob, e.g. /tmp/nccl_trace_rank_*: "
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE followed by the rank), read into a hang's or NCCL timeout's evidence.",
    )
