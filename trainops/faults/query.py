"""What the CLI and the browser read: a pipeline's incidents, one incident, a run's ETTR."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from trainops.faults import incidents as records
from trainops.faults import timeline as timelines
from trainops.faults.ettr import Ettr, compute
from trainops.faults.incidents import Incident, NodeCount, node_counts
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.spec import Manifest
from trainops.spec.common import duration_seconds


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
    from trainops.errors import NotFoundError

    if timelines.timeline_ref(repository, run_id).tag not in records.all_tags(registries, repository):
        raise NotFoundError(
            f"no run {run_id} is recorded in {repository.repo_url} (no timeline, no incident)",
            hint="`trainops incidents ls` lists every run's incidents; a run's id is in `train run`'s output",
        )


def show_incident(manifest: Manifest, *, incident_id: str, insecure: bool = False) -> Incident:
    from trainops.errors import NotFoundError

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


@dataclass(frozen=True)
class LocalRunStatus:
    """A `train run --local` run as its records say: ETTR and its parts."""

    run_id: str
    ettr: Ettr


def local_status(manifest: Manifest, *, run_id: str, insecure: bool = False) -> LocalRunStatus:
    """The ETTR of a local run (NotFoundError when no start of it was recorded)."""
    from trainops.errors import NotFoundError

    ettr = run_ettr(manifest, run_id=run_id, insecure=insecure)
    if ettr.starts == 0:
        raise NotFoundError(
            f"no start of run {run_id} is recorded in {manifest.pipeline.spec.registry}",
            hint="`trainops incidents ls` lists the runs that failed; a run's id is in `train run`'s output",
        )
    return LocalRunStatus(run_id, ettr)
