"""Drills: inject a fault into a real, running run, so the loop detect → diagnose → act →
recover → remember can be rehearsed on one's own cluster.

A drill acts on this machine, on the run's trainer processes (those whose environment
holds TRAINOPS_RUN_ID=<run>; with `node`, also SLURMD_NODENAME=<node>): run it on the node,
e.g. inside the job with `srun --jobid=JOB --overlap -w NODE trainops drill …`.

- hang: the trainer is stopped (SIGSTOP): no output, no progress, as a hung collective;
- nccl-timeout / cuda-oom: the line PyTorch writes is written to the trainer's own stderr;
- xid: an `NVRM: Xid` kernel message is appended to the node's health file (the first
  train.faults.nodeHealth `file`);
- node-lost: every trainer process is killed (SIGKILL), as when the node goes down;
- slow-node: one rank (RANK=<rank> in its environment) is throttled for a while by a duty
  cycle of SIGSTOP and SIGCONT — stopped `duty` of every half second, so 1/(1 − duty) times
  slower (0.5: 2×), as a throttled GPU or a flapping link make it — then left running.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from trainops import clock
from trainops.errors import InputError, NotFoundError
from trainops.faults.signals import XID_TABLE
from trainops.manifest import Manifest

DrillKind = Literal["hang", "nccl-timeout", "cuda-oom", "xid", "node-lost", "slow-node"]
DRILLS: tuple[str, ...] = get_args(DrillKind)
_SKIP = {"srun", "slurmstepd", "trainops", "sbatch"}

LINES = {
    "nccl-timeout": "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out. (trainops drill)",
    "cuda-oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 79.11 GiB of which 1.10 GiB is free. (trainops drill)",
}


@dataclass(frozen=True)
class DrillResult:
    drill: str
    run_id: str
    node: str | None
    pids: list[int]
    injected: str  # when (ISO 8601 UTC)
    evidence: str  # what was done, in words


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def trainer_pids(run_id: str, *, node: str | None, rank: int | None = None) -> list[int]:
    """The run's trainer processes on this machine (of one rank: RANK), oldest first (srun
    and trainops left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = _environ(int(entry.name))
        if env.get("TRAINOPS_RUN_ID") != run_id or (node and env.get("SLURMD_NODENAME") != node):
            continue
        if rank is not None and env.get("RANK") != str(rank):
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm not in _SKIP:
            found.append(int(entry.name))
    return sorted(found)


def _health_file(manifest: Manifest, node: str | None) -> Path:
    files = [s.file for s in manifest.require_train().faults.node_health if s.file]
    if not files:
        raise InputError(
            "the xid drill writes to a node-health file, and train.faults.nodeHealth has none",
            hint="add `nodeHealth: [{file: /var/log/trainops-kern-{node}.log}]` under train.faults",
        )
    name = node or os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    return Path(files[0].replace("{node}", name))


PERIOD = 0.5  # seconds of one stop/continue cycle of the slow-node drill


@dataclass(frozen=True)
class Throttle:
    rank: int = 1
    duty: float = 0.5  # the share of each cycle the rank is stopped
    seconds: float = 60.0  # how long


def inject(
    manifest: Manifest,
    *,
    run_id: str,
    drill: str,
    node: str | None = None,
    xid: int = 79,
    throttle: Throttle | None = None,
) -> DrillResult:
    """Inject one fault into the running run (module docstring); slow-node returns when its
    time is up."""
    if drill not in DRILLS:
        raise InputError(f"unknown drill {drill!r}", hint=f"use one of {', '.join(DRILLS)}")
    if drill == "xid":
        if xid not in XID_TABLE:
            raise InputError(f"Xid {xid} is not in trainops' table", hint=f"use one of {sorted(XID_TABLE)}")
        path = _health_file(manifest, node)
        line = f"NVRM: Xid (PCI:0000:3b:00): {xid}, pid=0, name=trainer, {XID_TABLE[xid].meaning} (trainops drill)\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
        return DrillResult(drill, run_id, node, [], clock.now_utc(), f"appended to {path}: {line.strip()}")
    slow = throttle or Throttle()
    if drill == "slow-node" and not 0 < slow.duty < 1:
        raise InputError(
            f"--duty {slow.duty} is not between 0 and 1", hint="0.5 stops the rank half the time: 2× slower"
        )
    pids = trainer_pids(run_id, node=node, rank=slow.rank if drill == "slow-node" else None)
    if not pids:
        where = (f" on node {node}" if node else "") + (f" of rank {slow.rank}" if drill == "slow-node" else "")
        raise NotFoundError(
            f"no trainer process of run {run_id}{where} on this machine",
            hint="run the drill on the node that trains: inside the job, through srun (see the drill command's help)",
        )
    if drill == "slow-node":
        return _throttle(run_id, node=node, pids=pids, throttle=slow)
    return _act(drill, run_id=run_id, node=node, pids=pids)


def _signal(pids: list[int], number: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            continue


def _throttle(run_id: str, *, node: str | None, pids: list[int], throttle: Throttle) -> DrillResult:
    """Stop and continue the rank's processes, `duty` of every PERIOD, for `seconds`."""
    started = clock.now_utc()
    end = time.monotonic() + throttle.seconds
    try:
        while time.monotonic() < end:
            _signal(pids, signal.SIGSTOP)
            time.sleep(PERIOD * throttle.duty)  # the duty cycle itself: stopped this long…
            _signal(pids, signal.SIGCONT)
            time.sleep(PERIOD * (1 - throttle.duty))  # …then running this long
    finally:
        _signal(pids, signal.SIGCONT)  # never leave the rank stopped
    slower = 1 / (1 - throttle.duty)
    return DrillResult(
        "slow-node",
        run_id,
        node,
        pids,
        started,
        f"rank {throttle.rank} ({len(pids)} process(es)) stopped {throttle.duty:.0%} of every {PERIOD} s for "
        f"{throttle.seconds:g} s: {slower:.1f}× slower",
    )


def _act(drill: str, *, run_id: str, node: str | None, pids: list[int]) -> DrillResult:
    if drill in LINES:
        with open(f"/proc/{pids[0]}/fd/2", "a", encoding="utf-8") as stderr:  # the trainer's own stderr
            stderr.write(LINES[drill] + "\n")
        return DrillResult(drill, run_id, node, pids[:1], clock.now_utc(), f"wrote to pid {pids[0]}'s stderr")
    number = signal.SIGSTOP if drill == "hang" else signal.SIGKILL
    for pid in pids:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            continue
    return DrillResult(drill, run_id, node, pids, clock.now_utc(), f"sent {number.name} to {len(pids)} process(es)")
