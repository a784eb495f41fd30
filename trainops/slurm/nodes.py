"""Slurm's nodes under a failing job: the allocation's node names, draining a broken node,
and putting the job back in the queue with a node excluded.

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

from trainops.slurm.client import SlurmHost, control, show_job


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
    before = [n for n in (fields.get("ExcNodeList") or "").split(",") if n and n != "(null)"]
    excluded = sorted(set(before) | set(nodes))
    with _sigterm_ignored():
        control(host, "scontrol", "requeue", job_id)
        if excluded:
            control(host, "scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(excluded)}")
    return excluded
