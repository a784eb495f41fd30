"""Slurm's nodes under a failing job: the allocation's node names, what slurmctld says of a
node before it is excluded, draining a broken node, and putting the job back in the queue
with a node excluded.

A running job's ExcNodeList cannot be changed (slurmctld: "Job is no longer pending
execution"), so the exclusion follows the requeue at once: `scontrol requeue` makes the job
pending (while its processes are still being killed, KillWait) and the update is then
accepted. The caller ignores SIGTERM for those two commands: Slurm sends it on the requeue.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from trainops.errors import NotFoundError
from trainops.faults.verify import NodeCheck
from trainops.slurm.client import SlurmHost, control, parse_fields, show_job

# sinfo's long states (%T) of a node no job can start on; a trailing `*` is a node not responding
UNUSABLE = ("down", "drain", "fail", "future", "inval", "maint", "unk", "power", "not_responding")


def allocation_nodes(host: SlurmHost) -> list[str]:
    """The node names of this job's allocation ($SLURM_JOB_NODELIST expanded), head first."""
    listed = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ""
    head = os.environ.get("SLURMD_NODENAME")
    names: list[str] = []
    if listed:
        proc = host.run(["scontrol", "show", "hostnames", listed])
        if proc.returncode == 0:
            names = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if head:
        names = [head] + [n for n in names if n != head]
    return names


def _excluded(fields: dict[str, str]) -> list[str]:
    return [n for n in (fields.get("ExcNodeList") or "").split(",") if n and n != "(null)"]


def check_node(host: SlurmHost, *, job_id: str, node: str) -> NodeCheck:
    """slurmctld's word on `node` (`scontrol show node`: its state, whether slurmd answers)
    and how many usable nodes of the job's partitions (`sinfo`) its exclusions would leave."""
    command = ["scontrol", "show", "node", "-o", node]
    proc = host.run(command)
    if proc.returncode != 0 or not proc.stdout.strip():
        text = (proc.stderr + proc.stdout).strip()
        if "not found" in text.lower() or not text:
            raise NotFoundError(f"Slurm does not know node {node!r}")
        raise host.failed(command, proc)
    state = parse_fields(proc.stdout).get("State", "UNKNOWN")
    lowered = state.lower()
    answers = (
        "*" not in state
        and not lowered.startswith(("down", "fail", "future", "unk"))
        and "not_responding" not in lowered
    )
    job = show_job(host, job_id) or {}
    needed = int((job.get("NumNodes") or "1").split("-")[0] or 1)
    partition = job.get("Partition")
    left = None
    if partition:
        listing = host.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N %T"])
        if listing.returncode == 0:
            usable = {
                name
                for name, _, long_state in (line.strip().partition(" ") for line in listing.stdout.splitlines())
                if name and not long_state.endswith("*") and not long_state.lower().startswith(UNUSABLE)
            }
            left = len(usable - set(_excluded(job)) - {node})
    return NodeCheck(node=node, answers=answers, state=state, left=left, needed=needed)


def drain_node(host: SlurmHost, *, node: str, reason: str) -> None:
    """`scontrol update NodeName=… State=DRAIN Reason=…`: no new job lands there."""
    control(host, "scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason=trainops: {reason}"[:200])


@contextlib.contextmanager
def _sigterm_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def requeue_excluding(host: SlurmHost, *, job_id: str, nodes: list[str]) -> list[str]:
    """Requeue the job, then exclude nodes from its next start (with those it excluded
    already); the excluded list."""
    fields = show_job(host, job_id) or {}
    before = _excluded(fields)
    excluded = sorted(set(before) | set(nodes))
    with _sigterm_ignored():
        control(host, "scontrol", "requeue", job_id)
        if excluded:
            control(host, "scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(excluded)}")
    return excluded
