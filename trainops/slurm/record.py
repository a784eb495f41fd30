"""The run record: which Slurm job a run became, so status, logs and cancel can find it.

One small JSON file per run, `.trainops/runs/<pipeline>/<run-id>/run.json` beside the
manifest (the run directory of a job submitted from here, next to its checkpoints). It is
written (by an atomic rename) once sbatch accepted the job, before the GitOps commit whose
`Trainops-Slurm-Job` trailer is the durable copy, and removed if that commit fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from trainops import runid
from trainops.errors import ExistsError, InputError, NotFoundError
from trainops.manifest import Manifest

RECORD = "run.json"


class RunRecord(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, frozen=True
    )

    run_id: str
    pipeline: str
    scheduler: str = "slurm"
    job_id: str
    job_name: str
    login_host: str | None = None
    submit_dir: str | None = None
    stdout: str | None = Field(None, description="The job's output file, as the job's filesystem names it.")
    submitted: str
    env: str | None = None


def runs_dir(manifest: Manifest) -> Path:
    return manifest.root / ".trainops" / "runs" / manifest.pipeline.metadata.name


def record_path(manifest: Manifest, run_id: str) -> Path:
    return runs_dir(manifest) / runid.check(run_id) / RECORD


def refuse_existing(manifest: Manifest, run_id: str) -> None:
    path = record_path(manifest, run_id)
    if path.is_file():
        job = read_record(path).job_id
        raise ExistsError(f"run {run_id} was already submitted (Slurm job {job})", hint="omit --run-id for a new run")


def write_record(manifest: Manifest, record: RunRecord) -> Path:
    path = record_path(manifest, record.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".run-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(record.model_dump_json(indent=2) + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def remove_record(manifest: Manifest, run_id: str) -> None:
    path = record_path(manifest, run_id)
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the run directory holds more than the record
        path.parent.rmdir()


def read_record(path: Path) -> RunRecord:
    try:
        return RunRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as err:
        raise InputError(f"{path}: not a trainops run record ({err.__class__.__name__})", hint="remove it") from None


def submitted_here(manifest: Manifest, *, run_id: str | None) -> bool:
    """Whether RUN (any run, when None) was submitted to Slurm from this project: such a run's
    status, logs and cancel go to Slurm whatever the manifest's current scheduler (an
    environment overlay chose Slurm when it was submitted)."""
    if run_id is not None:
        return record_path(manifest, run_id).is_file()
    return runs_dir(manifest).is_dir() and any(runs_dir(manifest).glob(f"*/{RECORD}"))


def find_record(manifest: Manifest, run_id: str) -> RunRecord:
    """The record of run_id; an unknown run is not found (exit 4)."""
    path = record_path(manifest, run_id)
    if not path.is_file():
        raise NotFoundError(
            f"no submitted run {run_id} of pipeline {manifest.pipeline.metadata.name} under {runs_dir(manifest)}",
            hint="`trainops train status` lists the runs submitted from here",
        )
    return read_record(path)


def all_records(manifest: Manifest) -> list[RunRecord]:
    """Every run submitted from here, oldest first."""
    base = runs_dir(manifest)
    if not base.is_dir():
        return []
    records = [read_record(path) for path in base.glob(f"*/{RECORD}")]
    return sorted(records, key=lambda r: (r.submitted, r.run_id))
