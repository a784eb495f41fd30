"""A run's post-incident report: for each incident, signals → diagnosis → action → recovery,
with the evidence and the time of each, and the run's ETTR around them.

Read from the registry only (the run's timeline and incidents: trainops.faults.query.run_report),
so it is the same on the machine that trained and anywhere else: `trainops incidents report RUN`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops import clock
from trainops.faults.catalog import bucket_for
from trainops.faults.ettr import Ettr, Phases
from trainops.faults.ettr import phases as split_mttr
from trainops.faults.incidents import Incident


@dataclass(frozen=True)
class Phase:
    """One step of an incident: what happened, when, on what evidence."""

    phase: str  # signal, diagnosis, action, recovery
    at: str | None  # ISO 8601 UTC; None: it has not happened (not recovered yet, or stopped)
    text: str
    seconds: float | None = None  # since the phase before
    evidence: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class IncidentReport:
    id: str
    fault: str
    node: str | None
    action: str
    bucket: str
    node_flagged: bool
    phases: list[Phase]
    mttr_seconds: float | None
    steps_lost: int | None
    mttr_phases: Phases | None = None  # the MTTR split: detect, decide, reschedule, restore, first step


@dataclass(frozen=True)
class RunReport:
    run_id: str
    pipeline: str
    starts: int
    ettr: Ettr
    incidents: list[IncidentReport]


def _between(a: str | None, b: str | None) -> float | None:
    if a is None or b is None:
        return None
    return round((clock.parse(b) - clock.parse(a)).total_seconds(), 3)


def incident_report(incident: Incident) -> IncidentReport:
    """The four phases of one incident, from its record."""
    bucket = incident.bucket or bucket_for(incident.fault, incident.detail)
    where = f" on {incident.node}" if incident.node else ""
    flagged = " (node flagged for a person)" if incident.node_flagged else ""
    if incident.recovered is not None:
        resumed = f"resumed from {incident.resumed_from or '-'} at step {incident.resumed_step}"
        lost = f", {incident.steps_lost} steps trained again" if incident.steps_lost is not None else ""
        recovery = f"the trainer progressed again: {resumed}{lost}"
    elif incident.action == "stop":
        recovery = "none: the run was stopped"
    else:
        recovery = "not yet: no progress reported since"
    first = incident.evidence[0] if incident.evidence else "-"
    acted = incident.acted or incident.detected  # a record from before `acted` was kept: at the decision
    phases = [
        Phase("signal", incident.evidence_at, f"{incident.source}: {first}", None, incident.evidence),
        Phase("diagnosis", incident.detected, f"{incident.fault}{where}: {incident.detail}",
              _between(incident.evidence_at, incident.detected)),
        Phase("action", acted, f"{incident.action_note}{flagged}", _between(incident.detected, acted)),
        Phase("recovery", incident.recovered, recovery, _between(acted, incident.recovered)),
    ]  # fmt: skip
    return IncidentReport(
        id=incident.id,
        fault=incident.fault,
        node=incident.node,
        action=incident.action,
        bucket=bucket,
        node_flagged=incident.node_flagged,
        phases=phases,
        mttr_seconds=incident.mttr_seconds,
        steps_lost=incident.steps_lost,
        mttr_phases=split_mttr(incident),
    )
