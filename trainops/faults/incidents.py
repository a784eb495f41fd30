"""Incidents: each failure of a run, remembered in the registry beside the run.

An incident is a small artifact (kind `other`) in the repository
`<registry>/<pipeline>/incidents`, tagged with its id `<run-id>.<n>`, whose one file
`incident.json` (media type application/vnd.trainops.incident.v1+json) is the record below;
its annotations repeat the run, class, node and detection time so a listing needs no blob.
It is written through the Store API, so every backend holds it; it is written when the
action is taken and written again (same tag) when the run has recovered. See registry/SPEC.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from trainops import clock
from trainops.errors import IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.artifact import build_manifest, canonical_json, config_blob
from trainops.registry.backends.base import Descriptor
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference

INCIDENT_FILE = "incident.json"
MAX_RECORD = 1024 * 1024


class Incident(BaseModel):
    """One failure of a run: what was seen, what was done, how the run came back."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, frozen=True
    )

    schema_version: Literal[1] = 1
    id: str
    pipeline: str
    run_id: str
    job_id: str | None = None
    fault: str = Field(description="The fault class (trainops incidents classes).")
    detail: str
    source: str = Field(
        description="trainer, node-health, metrics, exit, progress, cluster (the API server), scheduler (Slurm's "
        "view of the job) or alertmanager (an SLO's burn-rate alert)."
    )
    evidence: list[str]
    node: str | None = None
    action: str = Field(description="restart, requeue, drain or stop; what was done.")
    bucket: str | None = Field(
        None, description="What resolves it: restart-app, reset-gpu, drain-service or fix-app (incidents classes)."
    )
    action_note: str = Field(description="The action in words: the Slurm commands run, why it escalated.")
    evidence_at: str = Field(description="When the first evidence was read (ISO 8601 UTC).")
    detected: str = Field(description="When the supervisor acted on it.")
    acted: str | None = Field(
        None, description="When the action was carried out: the trainer stopped, the job requeued, the commit pushed."
    )
    last_step: int | None = Field(None, description="The last step the trainer reported before the failure.")
    restarted: str | None = Field(None, description="When the trainer (its job, its pod) started again.")
    restore_ended: str | None = Field(None, description="When that start's checkpoint restore ended.")
    recovered: str | None = Field(None, description="When the trainer reported progress again.")
    resumed_from: str | None = Field(None, description="The checkpoint the restarted trainer resumed from.")
    resumed_step: int | None = None
    steps_lost: int | None = Field(None, description="Steps trained again: lastStep - resumedStep.")
    node_flagged: bool = Field(
        False,
        description="The node is flagged for a person: it reached faults.drainAfter incidents in its window, or "
        "it was the last node the job could run on and was not excluded (the action says what was done instead).",
    )
    # an SLO's burn-rate alert (source alertmanager, trainops.ui.alerts): runId names the run or the release
    slo: str | None = Field(None, description="The SLO whose error budget burned.")
    subject: Literal["run", "release"] | None = Field(None, description="What runId names: a run or a release.")
    burn_rate: float | None = Field(None, description="The burn rate the alert reported last.")
    query: str | None = Field(None, description="The evidence query: the burn rate over the alert's long window.")
    fingerprint: str | None = Field(None, description="Alertmanager's fingerprint of the alert.")

    @property
    def mttr_seconds(self) -> float | None:
        if self.recovered is None:
            return None
        return (clock.parse(self.recovered) - clock.parse(self.evidence_at)).total_seconds()


def incidents_repository(registries: Registries, *, registry: str, pipeline: str) -> Reference:
    return registries.ref(f"{registry.rstrip('/')}/{pipeline}/incidents")


def is_incident_tag(tag: str, run_id: str | None) -> bool:
    """`<run-id>.<n>` (of run_id, when given); the run's timeline is `<run-id>.timeline`."""
    run, _, number = tag.rpartition(".")
    return number.isdigit() and bool(run) and (run_id is None or run == run_id)


def next_id(registries: Registries, *, repository: Reference, run_id: str) -> str:
    """`<run-id>.<n>`: one more than the run's incidents so far (one supervisor writes a run's)."""
    numbers = [int(t.rpartition(".")[2]) for t in all_tags(registries, repository) if is_incident_tag(t, run_id)]
    return f"{run_id}.{max(numbers, default=0) + 1}"


def save(registries: Registries, *, repository: Reference, incident: Incident) -> Reference:
    """Push the record (again, when it changed): tag = the incident's id."""
    annotations = {
        media.A_INCIDENT_RUN: incident.run_id,
        media.A_INCIDENT_CLASS: incident.fault,
        media.A_INCIDENT_DETECTED: incident.detected,
    }
    if incident.node:
        annotations[media.A_INCIDENT_NODE] = incident.node
    body = incident.model_dump(by_alias=True)
    return save_record(
        registries,
        ref=repository.with_tag(incident.id),
        data=body,
        media_type=media.INCIDENT,
        filename=INCIDENT_FILE,
        pipeline=incident.pipeline,
        run_id=incident.run_id,
        annotations=annotations,
    )


def save_record(
    registries: Registries,
    *,
    ref: Reference,
    data: object,
    media_type: str,
    filename: str,
    pipeline: str,
    run_id: str,
    annotations: dict[str, str],
) -> Reference:
    """A small record artifact (kind `other`): one canonical-JSON layer of media_type, tagged."""
    from trainops.registry.store import bytes_source, leased, upload_if_missing  # lazy: loads sqlite3

    backend = registries.backend(ref)
    created = clock.now_utc()
    lineage = Lineage(pipeline=pipeline, run_id=run_id)
    blob = bytes_source(canonical_json(data))
    with leased(backend, ref.repository):  # gc keeps the record's blobs until the manifest names them
        upload_if_missing(backend, ref.repository, blob, lambda _n: None)
        layer = Descriptor(media_type, blob.digest, blob.size, {media.A_TITLE: filename})
        config_bytes, config_type = config_blob("other", created, lineage, [layer])
        config = bytes_source(config_bytes)
        upload_if_missing(backend, ref.repository, config, lambda _n: None)
        manifest = build_manifest(
            kind="other",
            config=Descriptor(config_type, config.digest, config.size),
            layers=[layer],
            created=created,
            lineage=lineage,
            annotations=annotations,
        )
        backend.put_manifest(ref.repository, manifest, tag=ref.tag)
    return ref.with_digest(manifest.digest)


def all_tags(registries: Registries, repository: Reference) -> list[str]:
    try:
        return registries.backend(repository).list_tags(repository.repository)
    except NotFoundError:
        return []


def read(registries: Registries, *, repository: Reference, incident_id: str) -> Incident:
    """The record tagged incident_id (digest-checked, size-capped)."""
    data, where = read_file(registries, ref=repository.with_tag(incident_id))
    try:
        return Incident.model_validate(json.loads(data))
    except ValueError as err:
        raise IntegrityError(f"{where}: not an incident record: {str(err).splitlines()[0]}") from None


def read_file(registries: Registries, *, ref: Reference) -> tuple[bytes, str]:
    """The one file of a small record artifact (digest-checked, size-capped), and its pinned ref."""
    from trainops.registry.records import record_file  # lazy: loads sqlite3
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    found = resolve(registries, ref=ref)
    return record_file(registries, found=found, what="a fault record", limit=MAX_RECORD), str(found.ref)


def list_incidents(registries: Registries, *, repository: Reference, run_id: str | None = None) -> list[Incident]:
    """The incidents (of one run, or all), oldest first."""
    tags = [t for t in all_tags(registries, repository) if is_incident_tag(t, run_id)]
    found = [read(registries, repository=repository, incident_id=t) for t in tags]
    return sorted(found, key=lambda i: (i.evidence_at, i.id))


@dataclass(frozen=True)
class NodeCount:
    node: str
    incidents: int
    in_window: int
    flagged: bool
    faults: list[str]


def node_counts(incidents: list[Incident], *, threshold: int, window: timedelta) -> list[NodeCount]:
    """Per node: its incidents, how many fall in the window before now, and whether that
    reaches the drain threshold (faults.drainAfter); most incidents first."""
    since = clock.now() - window
    out: list[NodeCount] = []
    nodes = sorted({i.node for i in incidents if i.node})
    for node in nodes:
        mine = [i for i in incidents if i.node == node]
        recent = [i for i in mine if clock.parse(i.evidence_at) >= since]
        faults = sorted({i.fault for i in mine})
        out.append(NodeCount(node, len(mine), len(recent), len(recent) >= threshold, faults))
    return sorted(out, key=lambda c: (-c.in_window, -c.incidents, c.node))
