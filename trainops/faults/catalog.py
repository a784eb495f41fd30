"""The fault knowledge base: for each fault class, what resolves it, the NVIDIA Xids that
name it, the DCGM signals that come before it, and the lines the trainer and NCCL write.

Resolution buckets follow NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, its
"Resolution Bucket (Immediate Action)" column: RESTART_APP, RESET_GPU, RESTART_BM, …),
folded into four that say what to do with a training job:

- restart-app: the GPU and the node are sound; restart the application (in place);
- reset-gpu: the GPU needs a reset (`nvidia-smi -r` with nothing on it) or the node a reboot
  before it is used again: keep the job off it until then;
- drain-service: the node needs a person (reboot, reseat, replace): drain it;
- fix-app: retrying does not help: the code, the data or the configuration must change.

Each Xid records NVIDIA's own bucket name as its catalog gives it and whether that entry is
`certain` (checked against NVIDIA's catalog) or recalled and to be checked against the
catalog of the driver in use — the buckets of some Xids differ between GPU generations.

The counters are DCGM fields for dcgm-exporter's counters file (`trainops incidents
dcgm-counters`): dcgm-exporter's own default file leaves the ECC, retired-page, NVLink error
and throttle fields commented out, and those are the ones that rise before the failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from trainops.manifest.faults import FaultClass

Bucket = Literal["restart-app", "reset-gpu", "drain-service", "fix-app"]
BUCKETS: tuple[str, ...] = get_args(Bucket)

BUCKET_MEANINGS: dict[str, str] = {
    "restart-app": "the GPU and the node are sound: restart the application",
    "reset-gpu": "reset the GPU (or reboot the node) before it is used",
    "drain-service": "drain the node: it needs a person (reboot, reseat, replace)",
    "fix-app": "retrying does not help: change the code, data or configuration",
}


@dataclass(frozen=True)
class XidEntry:
    xid: int
    mnemonic: str  # the driver's name for it
    meaning: str
    fault: FaultClass
    nvidia: str  # NVIDIA's immediate-action resolution bucket, as its catalog names it
    bucket: Bucket
    certain: bool  # False: recalled, check it against the catalog of the driver in use


XIDS: tuple[XidEntry, ...] = (
    XidEntry(
        8,
        "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
        "GPU stopped processing",
        "xid-application",
        "RESTART_APP",
        "restart-app",
        True,
    ),
    XidEntry(
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION",
        "graphics engine exception: the application (an illegal memory access)",
        "xid-application",
        "RESTART_APP",
        "restart-app",
        True,
    ),
    XidEntry(
        31,
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR",
        "GPU memory page fault: the application",
        "xid-application",
        "RESTART_APP",
        "restart-app",
        True,
    ),
    XidEntry(
        43,
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "GPU stopped processing: the application",
        "xid-application",
        "RESTART_APP",
        "restart-app",
        False,
    ),
    XidEntry(
        45,
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "preemptive cleanup after an earlier error",
        "xid-application",
        "IGNORE",
        "restart-app",
        False,
    ),
    XidEntry(
        48, "ROBUST_CHANNEL_DBE_ERROR", "double-bit ECC error", "ecc-uncorrectable", "RESET_GPU", "reset-gpu", True
    ),
    XidEntry(
        63,
        "ROBUST_CHANNEL_ECC_PAGE_RETIREMENT_OR_ROW_REMAP_EVENT",
        "ECC page retirement or row remapping recorded: the GPU needs a reset",
        "row-remap-pending",
        "RESET_GPU",
        "reset-gpu",
        False,
    ),
    XidEntry(
        64,
        "ROBUST_CHANNEL_ECC_PAGE_RETIREMENT_OR_ROW_REMAP_FAILURE",
        "ECC page retirement or row remapping failed",
        "row-remap-failed",
        "RESET_GPU then CONTACT_SUPPORT",
        "drain-service",
        False,
    ),
    XidEntry(74, "NVLINK_ERROR", "NVLink error", "nvlink", "WORKFLOW_NVLINK_ERR (reset the GPU)", "reset-gpu", False),
    XidEntry(
        79,
        "GPU_HAS_FALLEN_OFF_THE_BUS",
        "the GPU has fallen off the bus",
        "fell-off-bus",
        "RESTART_BM",
        "drain-service",
        True,
    ),
    XidEntry(
        92,
        "HIGH_SINGLE_BIT_ECC_ERROR_RATE",
        "high single-bit ECC error rate",
        "ecc-uncorrectable",
        "RESET_GPU",
        "reset-gpu",
        False,
    ),
    XidEntry(
        94,
        "ROBUST_CHANNEL_CONTAINED_ERROR",
        "contained ECC error: the application must restart",
        "ecc-contained",
        "RESTART_APP",
        "restart-app",
        True,
    ),
    XidEntry(
        95,
        "ROBUST_CHANNEL_UNCONTAINED_ERROR",
        "uncontained ECC error: the GPU needs a reset",
        "ecc-uncorrectable",
        "RESET_GPU",
        "reset-gpu",
        True,
    ),
)

XID_BY_NUMBER: dict[int, XidEntry] = {e.xid: e for e in XIDS}


@dataclass(frozen=True)
class Counter:
    """A DCGM field dcgm-exporter can export, and the fault classes its rise comes before."""

    field: str
    kind: Literal["counter", "gauge"]
    help: str
    default: bool  # dcgm-exporter's default-counters.csv exports it
    precedes: tuple[str, ...] = ()  # fault classes; () for load and health context


COUNTERS: tuple[Counter, ...] = (
    # dcgm-exporter's defaults (etc/default-counters.csv): kept, the file replaces them
    Counter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", True),
    Counter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", True),
    Counter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", True),
    Counter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", True),
    Counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", True),
    Counter(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        True,
        ("fell-off-bus", "slow-node"),
    ),
    Counter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", True),
    Counter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", True),
    Counter(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        True,
        (
            "xid-application",
            "ecc-contained",
            "ecc-uncorrectable",
            "row-remap-pending",
            "row-remap-failed",
            "nvlink",
            "fell-off-bus",
        ),
    ),
    Counter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", True),
    Counter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", True),
    Counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total NVLink bandwidth counters for all lanes.", True),
    Counter(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors.",
        True,
        ("row-remap-pending",),
    ),
    Counter(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors.",
        True,
        ("row-remap-pending",),
    ),
    Counter(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.", True, ("row-remap-failed",)
    ),
    # what the default leaves off, and trainops turns on
    Counter(
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "gauge",
        "Whether remapping of rows is pending (reset the GPU).",
        False,
        ("row-remap-pending",),
    ),
    Counter(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors.", False, ("ecc-uncorrectable",)
    ),
    Counter(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Double-bit volatile ECC errors.",
        False,
        ("ecc-uncorrectable", "ecc-contained"),
    ),
    Counter(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Single-bit persistent ECC errors.", False, ("ecc-uncorrectable",)
    ),
    Counter(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Double-bit persistent ECC errors.", False, ("ecc-uncorrectable",)
    ),
    Counter(
        "DCGM_FI_DEV_RETIRED_SBE", "counter", "Pages retired for single-bit errors.", False, ("row-remap-pending",)
    ),
    Counter(
        "DCGM_FI_DEV_RETIRED_DBE", "counter", "Pages retired for double-bit errors.", False, ("row-remap-pending",)
    ),
    Counter(
        "DCGM_FI_DEV_RETIRED_PENDING",
        "counter",
        "Pages pending retirement (reset the GPU).",
        False,
        ("row-remap-pending",),
    ),
    Counter(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "NVLink flow-control CRC errors.",
        False,
        ("nvlink",),
    ),
    Counter("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "NVLink data CRC errors.", False, ("nvlink",)),
    Counter(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "NVLink retries.", False, ("nvlink", "slow-node")
    ),
    Counter("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "NVLink recovery errors.", False, ("nvlink",)),
    Counter(
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        "Clock throttle reasons (bitmask; DCGM_FI_DEV_CLOCKS_EVENT_REASONS in DCGM 3.3 and later).",
        False,
        ("slow-node",),
    ),
    Counter(
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in us).",
        False,
        ("slow-node",),
    ),
    Counter(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in us).",
        False,
        ("slow-node",),
    ),
    Counter(
        "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        "counter",
        "Throttling duration due to reliability constraints (in us).",
        False,
        ("slow-node",),
    ),
)


def counters() -> list[Counter]:
    """The fields of the counters file: dcgm-exporter's defaults, then what precedes failures."""
    return list(COUNTERS)


@dataclass(frozen=True)
class ClassEntry:
    """One fault class in the knowledge base."""

    fault: str
    bucket: Bucket
    xids: list[int]
    health: list[str]  # DCGM health-watch failures (DCGM_FR_…) that name it
    counters: list[str]  # DCGM fields whose rise comes before it
    lines: list[str]  # what the trainer, NCCL, srun or the kernel write


BUCKET_OF: dict[str, Bucket] = {
    "nccl-timeout": "restart-app",
    "hang": "restart-app",
    "storage-error": "restart-app",
    "segfault": "restart-app",
    "xid-application": "restart-app",
    "ecc-contained": "restart-app",
    "task-killed": "restart-app",
    "slow-node": "drain-service",
    "node-lost": "drain-service",
    "nvlink": "reset-gpu",
    "row-remap-pending": "reset-gpu",
    "row-remap-failed": "drain-service",
    "ecc-uncorrectable": "reset-gpu",
    "fell-off-bus": "drain-service",
    "cuda-oom": "fix-app",
    "nan-loss": "fix-app",
    "code-error": "fix-app",
    "unschedulable": "drain-service",
}

HEALTH: dict[str, list[str]] = {
    "nvlink": ["DCGM_FR_NVLINK_DOWN", "DCGM_FR_NVLINK_ERROR_THRESHOLD", "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD"],
    "row-remap-failed": ["DCGM_FR_ROW_REMAP_FAILURE"],
    "row-remap-pending": ["DCGM_FR_PENDING_ROW_REMAP", "DCGM_FR_PENDING_PAGE_RETIREMENTS"],
    "fell-off-bus": ["DCGM_FR_FALLEN_OFF_BUS"],
    "ecc-uncorrectable": ["DCGM_FR_VOLATILE_DBE_DETECTED", "DCGM_FR_RETIRED_PAGES_LIMIT", "DCGM_FR_UNCONTAINED_ERROR"],
}

LINES: dict[str, list[str]] = {
    "nccl-timeout": [
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=ALLREDUCE, …) ran for … ms",
        "ProcessGroupNCCL's watchdog … timed out; TORCH_NCCL_DUMP_ON_TIMEOUT: Dumping flight recorder",
    ],
    "hang": ["(silence: no metrics line, heartbeat or checkpoint within faultTolerance.hangTimeout)"],
    "storage-error": ["OSError: [Errno 28] No space left on device", "Stale file handle", "Input/output error"],
    "segfault": ["Segmentation fault (core dumped)", "signal 11 (SIGSEGV)"],
    "xid-application": ["NVRM: Xid (PCI:0000:3b:00): 13, pid=…, Graphics Exception …"],
    "ecc-contained": ["NVRM: Xid (PCI:…): 94, pid=…, Contained: … Reset: No"],
    "slow-node": ['{"rank": 3, "step": 400, "node": "gpu-7"} (each rank\'s progress; the detector\'s verdict)'],
    "task-killed": ["srun: error: NODE: task 0: Killed (exit 137) on a node the scheduler still reaches"],
    "node-lost": ["srun: error: Node failure on NODE", "NODE_FAIL", "(exit 137, the scheduler says the node is down)"],
    "nvlink": ["NVRM: Xid (PCI:…): 74, pid=…, NVLink: fatal error detected on link …"],
    "row-remap-pending": ["NVRM: Xid (PCI:…): 63, pid=…, Row Remapper: New row marked for remapping, reset gpu …"],
    "row-remap-failed": ["NVRM: Xid (PCI:…): 64, pid=…, Row Remapper: … failed"],
    "ecc-uncorrectable": ["NVRM: Xid (PCI:…): 48, An uncorrectable double bit error (DBE) has been detected"],
    "fell-off-bus": ["NVRM: Xid (PCI:…): 79, pid=…, GPU has fallen off the bus."],
    "cuda-oom": ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …", "CUBLAS_STATUS_ALLOC_FAILED"],
    "nan-loss": ['{"step": 300, "train_loss": NaN}', "non-finite loss"],
    "code-error": ["Traceback (most recent call last): … ValueError: …", "(a non-zero exit)"],
    "unschedulable": [
        "scontrol show job: JobState=PENDING Reason=BadConstraints ExcNodeList=…",
        "PodScheduled=False Unschedulable: 0/N nodes are available: … didn't match Pod's node affinity/selector",
    ],
}


def entries(classes: tuple[str, ...]) -> list[ClassEntry]:
    """The knowledge base, class by class."""
    return [
        ClassEntry(
            fault=fault,
            bucket=BUCKET_OF[fault],
            xids=[e.xid for e in XIDS if e.fault == fault],
            health=HEALTH.get(fault, []),
            counters=[c.field for c in COUNTERS if fault in c.precedes],
            lines=LINES.get(fault, []),
        )
        for fault in classes
    ]


_XID_DETAIL = re.compile(r"^Xid (\d+):")


def bucket_for(fault: str, detail: str | None = None) -> Bucket:
    """The resolution bucket of a diagnosis: its Xid's (the detail starts `Xid N:`), else its class's."""
    match = _XID_DETAIL.match(detail or "")
    entry = XID_BY_NUMBER.get(int(match.group(1))) if match else None
    return entry.bucket if entry is not None else BUCKET_OF[fault]


def counters_csv() -> str:
    """dcgm-exporter's counters file (`-f`, or the Helm chart's ConfigMap): its defaults, and
    the fields that come before a failure, which its default file leaves commented out."""
    out = [
        "# dcgm-exporter counters, rendered by `trainops incidents dcgm-counters`",
        "# Format: DCGM FIELD, Prometheus metric type, help message",
        "",
        "# dcgm-exporter's defaults",
    ]
    out += [f"{c.field}, {c.kind}, {c.help}" for c in COUNTERS if c.default]
    out += ["", "# on for trainops: they rise before ECC, row-remap and NVLink failures, and show throttling"]
    out += [f"{c.field}, {c.kind}, {c.help}" for c in COUNTERS if not c.default]
    return "\n".join(out) + "\n"
