"""What the CLI and the browser read: a pipeline's incidents, one incident, a run's ETTR."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from trainops import clock
from trainops.errors import NotFoundError, RemoteError
from trainops.faults import incidents as records
from trainops.faults import timeline as timelines
from trainops.faults.catalog import bucket_for
from trainops.faults.ettr import Ettr, compute
from trainops.faults.incidents import Incident, NodeCount, node_counts
from trainops.faults.report import RunReport, incident_report
from trainops.faults.timeline import run_log_path
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.registry.context import Registries
from trainops.registry.reference import Reference


@dataclass(frozen=True)
class IncidentList:
    incidents: list[Incident]
    nodes: list[NodeCount] = field(default_factory=list)  # per node, flagged at faults.drainAfter


def _repository(manifest: Manifest, registries: Registries) -> Reference:
    spec = manifest.pipeline.spec
    return records.incidents_repository(registries, registry=spec.registry, pipeline=manifest.pipeline.metadata.name)


def list_incidents(manifest: Manifest, *, run_id: str | None = None, insecure: bool = False) -> IncidentList:
    """The pipeline's incidents (of one run), oldest first, and the per-node counts."""
    policy = manifest.require_train().faults.drain_after
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        found = records.list_incidents(registries, repository=repository, run_id=run_id)
        if run_id is not None and not found:
            _require_run(registries, repository, run_id)
    window = timedelta(seconds=duration_seconds(policy.window))
    return IncidentList(found, node_counts(found, threshold=policy.incidents, window=window))


def _require_run(registries: Registries, repository: Reference, run_id: str) -> None:
    """NotFoundError unless the registry knows run_id (its timeline: every supervised start)."""

    if timelines.timeline_ref(repository, run_id).tag not in records.all_tags(registries, repository):
        raise NotFoundError(
            f"no run {run_id} is recorded in {repository.repo_url} (no timeline, no incident)",
            hint="`trainops incidents ls` lists every run's incidents; a run's id is in `train run`'s output",
        )


def show_incident(manifest: Manifest, *, incident_id: str, insecure: bool = False) -> Incident:
    if not records.is_incident_tag(incident_id, None):
        hint = "ids look like RUN.N: `trainops incidents ls`"
        raise NotFoundError(f"{incident_id!r} is not an incident id", hint=hint)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        return records.read(registries, repository=_repository(manifest, registries), incident_id=incident_id)


def run_ettr(manifest: Manifest, *, run_id: str, insecure: bool = False) -> Ettr:
    """ETTR and its parts for a run, from its timeline and incidents in the registry."""
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        line = timelines.load(
            registries, repository=repository, pipeline=manifest.pipeline.metadata.name, run_id=run_id
        )
        found = records.list_incidents(registries, repository=repository, run_id=run_id)
    return compute(line, found)


def run_report(manifest: Manifest, *, run_id: str, insecure: bool = False) -> RunReport:
    """RUN's post-incident report (trainops.faults.report); unknown run: not found."""
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        return report_from(registries, repository, pipeline=manifest.pipeline.metadata.name, run_id=run_id)


def report_from(registries: Registries, repository: Reference, *, pipeline: str, run_id: str) -> RunReport:
    """RUN's report from an incidents repository (the CLI's, or one the browser indexed)."""
    found = records.list_incidents(registries, repository=repository, run_id=run_id)
    if not found:
        _require_run(registries, repository, run_id)
    line = timelines.load(registries, repository=repository, pipeline=pipeline, run_id=run_id)
    return RunReport(
        run_id=run_id,
        pipeline=pipeline,
        starts=len(line.segments),
        ettr=compute(line, found),
        incidents=[incident_report(i) for i in found],
    )


@dataclass(frozen=True)
class LocalRunStatus:
    """A `train run --local` run as its records say: ETTR and its parts."""

    run_id: str
    ettr: Ettr
    started: str | None = None  # its first start
    ended: str | None = None  # how its last start ended, when it has
    outcome: str | None = None


def local_runs(manifest: Manifest, *, insecure: bool = False) -> list[LocalRunStatus]:
    """The local runs of the pipeline, newest first: those the registry keeps a timeline of
    whose starts name no Slurm job."""
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        tags = records.all_tags(registries, repository)
        found = []
        for tag in tags:
            if not tag.endswith(timelines.TIMELINE_SUFFIX):
                continue
            line = _local_timeline(registries, repository, manifest, tag.removesuffix(timelines.TIMELINE_SUFFIX))
            if line is not None:
                incidents = [t for t in tags if records.is_incident_tag(t, line.run_id)]
                read = [records.read(registries, repository=repository, incident_id=t) for t in incidents]
                found.append(_status(line, read))
    return sorted(found, key=lambda r: r.started or "", reverse=True)


def _local_timeline(
    registries: Registries, repository: Reference, manifest: Manifest, run_id: str
) -> timelines.Timeline | None:
    """The run's timeline if it is a local run's (started at least once, no Slurm job)."""
    line = timelines.load(registries, repository=repository, pipeline=manifest.pipeline.metadata.name, run_id=run_id)
    if not line.segments or any(segment.job_id for segment in line.segments):
        return None
    return line


def _status(line: timelines.Timeline, incidents: list[Incident]) -> LocalRunStatus:
    last = line.segments[-1]
    return LocalRunStatus(line.run_id, compute(line, incidents), line.segments[0].started, last.ended, last.outcome)


def is_local_run(manifest: Manifest, *, run_id: str, insecure: bool = False) -> bool:
    """Whether run_id is a local run of this pipeline: its output is kept here, or the
    registry keeps its timeline (the output goes with the machine; the timeline stays)."""

    if run_log_path(manifest, run_id).is_file():
        return True
    try:
        with Registries.for_manifest(manifest, insecure=insecure) as registries:
            return _local_timeline(registries, _repository(manifest, registries), manifest, run_id) is not None
    except RemoteError:  # a cluster run's status must not need the registry: not known to be local
        return False


def local_status(manifest: Manifest, *, run_id: str, insecure: bool = False) -> LocalRunStatus:
    """The ETTR of a local run (NotFoundError when no start of it was recorded)."""

    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        line = timelines.load(
            registries, repository=repository, pipeline=manifest.pipeline.metadata.name, run_id=run_id
        )
        found = records.list_incidents(registries, repository=repository, run_id=run_id)
    if not line.segments:
        raise NotFoundError(
            f"no start of run {run_id} is recorded in {manifest.pipeline.spec.registry}",
            hint="`trainops train status` lists the local runs; a run's id is said as `train run` starts",
        )
    return _status(line, found)


def record_unschedulable(
    manifest: Manifest, *, run_id: str, job_id: str, why: str, evidence: list[str], insecure: bool = False
) -> Incident:
    """The incident of a run whose job can start nowhere after a requeue (class unschedulable):
    recorded once per job while it stays so (the open one is returned again). Nothing is done
    to the job: the incident says what would let it start."""

    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        found = records.list_incidents(registries, repository=repository, run_id=run_id)
        for incident in reversed(found):
            if incident.fault == "unschedulable" and incident.job_id == job_id and incident.recovered is None:
                return incident
        now = clock.iso(clock.now())
        incident = Incident(
            id=records.next_id(registries, repository=repository, run_id=run_id),
            pipeline=manifest.pipeline.metadata.name,
            run_id=run_id,
            job_id=job_id,
            fault="unschedulable",
            detail=why,
            source="scheduler",
            evidence=evidence,
            action="stop",
            bucket=bucket_for("unschedulable"),
            action_note="stop: nothing more is done; the job waits until its exclusions are cleared",
            evidence_at=now,
            detected=now,
        )
        records.save(registries, repository=repository, incident=incident)
        return incident


def close_unschedulable(manifest: Manifest, *, run_id: str, job_id: str, started: str, insecure: bool = False) -> None:
    """The job started after all (its exclusions were cleared): its unschedulable incident recovered."""
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        for incident in records.list_incidents(registries, repository=repository, run_id=run_id):
            if incident.fault == "unschedulable" and incident.job_id == job_id and incident.recovered is None:
                done = incident.model_copy(update={"recovered": started})
                records.save(registries, repository=repository, incident=done)


def open_unschedulable(manifest: Manifest, *, run_id: str, insecure: bool = False) -> Incident | None:
    """The run's unschedulable incident not yet recovered, if any (None for a run without records)."""
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = _repository(manifest, registries)
        found = records.list_incidents(registries, repository=repository, run_id=run_id)
    return next((i for i in reversed(found) if i.fault == "unschedulable" and i.recovered is None), None)
