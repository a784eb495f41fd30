"""The run's timeline: each start of its trainer (a segment), as the supervisor saw it.

A segment is written to the registry when the trainer starts and again when it ends, as
`<registry>/<pipeline>/incidents:<run-id>.timeline` (media type
application/vnd.trainops.timeline.v1+json): the times of the start, of the first and last
progress (a metrics line or a checkpoint, with its step), of the end, the step it resumed
from, the checkpoint save times, and how it ended. ETTR (trainops.faults.ettr) is computed
from it and the run's incidents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from trainops.errors import IntegrityError, NotFoundError
from trainops.faults.incidents import read_file, save_record
from trainops.manifest import Manifest
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

TIMELINE_FILE = "timeline.json"
TIMELINE_SUFFIX = ".timeline"
MAX_SEGMENTS = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, frozen=True
    )


class Mark(_Model):
    step: int
    at: str


class Segment(_Model):
    """One start of the trainer."""

    job_id: str | None = None
    node: str | None = None
    started: str = Field(description="When the supervisor started (restore, then the trainer).")
    resumed_step: int | None = Field(None, description="The step of the checkpoint it resumed from.")
    restore_ended: str | None = Field(None, description="When the restore ended and the trainer was launched.")
    first: Mark | None = Field(None, description="The first progress it reported.")
    last: Mark | None = Field(None, description="The last progress it reported.")
    ended: str | None = None
    outcome: str | None = Field(None, description="completed, restart, requeue, drain, stop, or a signal's name.")
    incident: str | None = Field(None, description="The incident this start ended in.")
    save_seconds: list[float] = Field(default_factory=list, description="Each checkpoint's write time.")


class Timeline(_Model):
    schema_version: Literal[1] = 1
    pipeline: str
    run_id: str
    segments: list[Segment] = Field(default_factory=list, max_length=MAX_SEGMENTS)


def run_log_path(manifest: Manifest, run_id: str) -> Path:
    """Where the supervisor keeps a local run's output (both streams, every start): what
    `train logs RUN` prints, and how `train status RUN` knows the run ran here."""
    return manifest.root / ".trainops" / "runs" / manifest.pipeline.metadata.name / "logs" / f"{run_id}.log"


def kept_output(manifest: Manifest, run_id: str) -> str | None:
    """A local run's output as its supervisor kept it; None when the run did not run here."""
    path = run_log_path(manifest, run_id)
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def timeline_ref(repository: Reference, run_id: str) -> Reference:
    return repository.with_tag(run_id + TIMELINE_SUFFIX)


def load(registries: Registries, *, repository: Reference, pipeline: str, run_id: str) -> Timeline:
    """The run's timeline; an empty one for a run that has none yet."""
    try:
        data, where = read_file(registries, ref=timeline_ref(repository, run_id))
    except NotFoundError:
        return Timeline(pipeline=pipeline, run_id=run_id)
    try:
        return Timeline.model_validate(json.loads(data))
    except ValueError as err:
        raise IntegrityError(f"{where}: not a trainops timeline: {str(err).splitlines()[0]}") from None


def store(registries: Registries, *, repository: Reference, timeline: Timeline) -> Reference:
    return save_record(
        registries,
        ref=timeline_ref(repository, timeline.run_id),
        data=timeline.model_dump(by_alias=True),
        media_type=media.TIMELINE,
        filename=TIMELINE_FILE,
        pipeline=timeline.pipeline,
        run_id=timeline.run_id,
        annotations={media.A_INCIDENT_RUN: timeline.run_id},
    )
