"""Submit a rendered sbatch script, and read, follow and cancel the job a run became.

Submission never leaves a GitOps commit claiming a job that does not exist, nor a job that
no commit records: the script goes to `sbatch --hold` first (a refused script stops here,
with sbatch's message), then the run record is written, the GitOps commit names the job in
its `Trainops-Slurm-Job` trailer, and the job is released. If the commit fails, the held
job — which never ran — is cancelled and the record removed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainops import clock
from trainops.errors import TrainopsError
from trainops.manifest import Manifest
from trainops.manifest.stages import SlurmOptions
from trainops.slurm.client import SlurmHost, control, read_file, sbatch, show_job
from trainops.slurm.record import (
    RunRecord,
    all_records,
    find_record,
    refuse_existing,
    remove_record,
    write_record,
)

if TYPE_CHECKING:
    from trainops.faults.ettr import Ettr

log = logging.getLogger(__name__)

JOB_TRAILER = "Trainops-Slurm-Job"


@dataclass(frozen=True)
class SubmittedJob:
    job_id: str
    record: str  # the run record's path
    commit: Any  # the GitOps CommitResult


def host_for(options: SlurmOptions | None, *, here: str | None) -> SlurmHost:
    """Where sbatch runs: the login host (in its submitDir or home) or here (in `here`)."""
    if options is not None and options.login_host:
        return SlurmHost(login_host=options.login_host, submit_dir=options.submit_dir)
    return SlurmHost(submit_dir=(options.submit_dir if options is not None else None) or here)


def submit_job(
    manifest: Manifest,
    *,
    script: str,
    run_id: str,
    job_name: str,
    commit: Callable[[dict[str, str]], Any],
) -> SubmittedJob:
    """sbatch --hold, commit (with the job id as a trailer), record, release."""
    train = manifest.pipeline.spec.train
    options = train.slurm if train is not None else None
    refuse_existing(manifest, run_id)
    host = host_for(options, here=str(manifest.root))
    job_id = sbatch(host, script=script, cwd=host.submit_dir, hold=True)
    try:
        fields = show_job(host, job_id) or {}
        record = RunRecord(
            run_id=run_id,
            pipeline=manifest.pipeline.metadata.name,
            job_id=job_id,
            job_name=job_name,
            login_host=host.login_host,
            submit_dir=host.submit_dir,
            stdout=fields.get("StdOut") or None,
            submitted=clock.iso(),
            env=manifest.env,
        )
        path = write_record(manifest, record)
        result = commit({JOB_TRAILER: job_id})
    except BaseException:
        _cancel_quietly(host, job_id)
        remove_record(manifest, run_id)
        raise
    control(host, "scontrol", "release", job_id)
    return SubmittedJob(job_id=job_id, record=str(path), commit=result)


def _cancel_quietly(host: SlurmHost, job_id: str) -> None:
    try:
        control(host, "scancel", job_id)
    except TrainopsError as err:
        log.warning("could not cancel held Slurm job %s after the GitOps commit failed: %s", job_id, err)


# -- status, logs, cancel ------------------------------------------------------------------


@dataclass(frozen=True)
class JobStatus:
    run_id: str
    job_id: str
    state: str  # Slurm's JobState, or UNKNOWN once slurmctld has forgotten the job
    reason: str | None
    nodes: str | None
    restarts: int
    exit_code: str | None
    submitted: str
    started: str | None
    comment: str | None  # the supervisor's note (hang retries, why it failed)
    stdout: str | None
    unschedulable: str | None = (
        None  # a pending job Slurm can never start (its exclusions, its partition): why, and the fix
    )
    ettr: Ettr | None = None  # with one run asked for: ETTR and its parts (trainops.faults)
    incident: str | None = None  # with one run asked for: the incident of its unschedulable job


def _value(fields: dict[str, str], key: str) -> str | None:
    value = fields.get(key)
    return None if value in (None, "", "(null)", "None", "Unknown") else value


def _time(text: str | None) -> str | None:
    """A Slurm time (SLURM_TIME_FORMAT gives it its offset) in the one format; None if absent or unreadable."""
    if text is None:
        return None
    try:
        return clock.iso(clock.parse(text))
    except ValueError:
        return None


# a pending job's reasons that no wait resolves: the request itself cannot be met
NEVER_STARTS = ("BadConstraints", "PartitionNodeLimit", "PartitionConfig")


def _unschedulable(job_id: str, fields: dict[str, str]) -> str | None:
    """Why a pending job will never start, and what to do (a requeue whose ExcNodeList covers
    every node the job could run on pends with Reason=BadConstraints)."""
    reason = _value(fields, "Reason")
    excluded = _value(fields, "ExcNodeList")
    if fields.get("JobState") != "PENDING":
        return None
    if reason is not None and reason.startswith("ReqNodeNotAvail") and excluded is not None:
        return (
            f"Reason={reason}: with ExcNodeList={excluded} the nodes of partition {fields.get('Partition', '?')} left "
            f"are unavailable (down, drained or reserved); resume one, or once the excluded nodes are sound: "
            f"scontrol update JobId={job_id} ExcNodeList="
        )
    if reason not in NEVER_STARTS:
        return None
    if excluded is None:
        return f"Reason={reason}: the job asks for more than partition {fields.get('Partition', '?')} offers"
    return (
        f"Reason={reason}: ExcNodeList={excluded} leaves no node of partition {fields.get('Partition', '?')} it can "
        f"run on; once the nodes are sound: scontrol update JobId={job_id} ExcNodeList="
    )


def _status(record: RunRecord, fields: dict[str, str] | None) -> JobStatus:
    fields = fields or {}
    return JobStatus(
        run_id=record.run_id,
        job_id=record.job_id,
        state=fields.get("JobState", "UNKNOWN"),
        reason=_value(fields, "Reason"),
        nodes=_value(fields, "NodeList"),
        restarts=int(fields.get("Restarts", "0") or 0),
        exit_code=_value(fields, "ExitCode"),
        submitted=record.submitted,
        started=_time(_value(fields, "StartTime")),
        comment=_value(fields, "Comment"),
        stdout=_value(fields, "StdOut") or record.stdout,
        unschedulable=_unschedulable(record.job_id, fields),
    )


def _host(record: RunRecord) -> SlurmHost:
    return SlurmHost(login_host=record.login_host, submit_dir=record.submit_dir)


def job_status(manifest: Manifest, *, run_id: str | None = None) -> list[JobStatus]:
    """The state of one run's job (unknown run: not found) with its ETTR, or of every run
    submitted from here."""
    from trainops.faults.query import run_ettr  # lazy: loads statistics

    if run_id is None:
        return [_status(record, show_job(_host(record), record.job_id)) for record in all_records(manifest)]
    record = find_record(manifest, run_id)
    fields = show_job(_host(record), record.job_id)
    status = _status(record, fields)
    incident = _unschedulable_incident(manifest, status, fields or {})
    return [dataclasses.replace(status, ettr=run_ettr(manifest, run_id=run_id), incident=incident)]


def _unschedulable_incident(manifest: Manifest, status: JobStatus, fields: dict[str, str]) -> str | None:
    """A job its exclusions leave nowhere to start is an incident of its own (class
    unschedulable), recorded the first time `train status` sees it; closed once the job runs."""
    from trainops.faults.query import close_unschedulable, record_unschedulable  # lazy: loads statistics

    if status.unschedulable is None:
        if status.state == "RUNNING" and status.started is not None:
            close_unschedulable(manifest, run_id=status.run_id, job_id=status.job_id, started=status.started)
        return None
    if _value(fields, "ExcNodeList") is None:
        return None  # asked for more than the partition has from the start: no requeue did it
    said = " ".join(
        f"{key}={fields[key]}" for key in ("JobState", "Reason", "ExcNodeList", "Partition") if key in fields
    )
    incident = record_unschedulable(
        manifest,
        run_id=status.run_id,
        job_id=status.job_id,
        why=status.unschedulable,
        evidence=[f"scontrol show job {status.job_id}: {said}"],
    )
    return incident.id


@dataclass(frozen=True)
class JobLog:
    run_id: str
    job_id: str
    path: str | None
    text: str | None  # None: the job has written nothing yet (or the file is gone)


def job_logs(manifest: Manifest, *, run_id: str) -> JobLog:
    """The job's output file (stdout and stderr of every start: sbatch --open-mode=append)."""
    record = find_record(manifest, run_id)
    host = _host(record)
    fields = show_job(host, record.job_id) or {}
    path = _value(fields, "StdOut") or record.stdout
    text = read_file(host, path) if path else None
    return JobLog(run_id=run_id, job_id=record.job_id, path=path, text=text)


def cancel_job(manifest: Manifest, *, run_id: str) -> JobStatus:
    """scancel: Slurm sends SIGTERM (the trainer saves, the watcher pushes), then SIGKILL after KillWait."""
    record = find_record(manifest, run_id)
    host = _host(record)
    control(host, "scancel", record.job_id)
    return _status(record, show_job(host, record.job_id))
