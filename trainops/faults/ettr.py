"""Effective training time ratio (ETTR) and its parts, from a run's timeline and incidents.

For consecutive starts i and i+1 of the trainer (segments), with τ the seconds per step
measured in segment i (between its first and last reported progress):

- **time lost to the restart** = (first progress of i+1 − last progress of i) − the steps
  i+1 trained before that first report × τ: detection, the kill, the scheduler, the restore
  and the start-up;
- **time lost to recomputed steps** = (last step of i − step i+1 resumed from) × τ: work
  done after the newest checkpoint, done again;
- **productive time** = wall-clock − both losses, summed over the restarts;
- **ETTR** = productive / wall-clock, wall-clock running from the first start to the last
  end (or to now for a running run).

Each recovered incident's MTTR (first evidence → progress again) is split into phases at
the instants its record holds: **detect** (first evidence → the decision), **decide** (the
decision → the action carried out: the trainer stopped, the job requeued, the commit
pushed), **reschedule** (→ the trainer started again), **restore** (→ its checkpoint
restore ended) and **first step** (→ its first progress). A phase whose ends are not both
recorded is None (a Kubernetes run: the pod running is its recovery, so restore and first
step are not seen); the run's phases are the medians over its incidents.

Checkpoint save time is reported beside it (an undisturbed run saves too, so it stays in
the productive time) and with the mean time between failures gives the Young/Daly
checkpoint interval √(2 · MTBF · save).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import astuple, dataclass, field

from trainops import clock
from trainops.faults.incidents import Incident
from trainops.faults.timeline import Segment, Timeline


@dataclass(frozen=True)
class Phases:
    """MTTR split at the instants an incident records (module docstring); seconds, None when unknown."""

    detect_seconds: float | None
    decide_seconds: float | None
    reschedule_seconds: float | None
    restore_seconds: float | None
    first_step_seconds: float | None


def phases(incident: Incident) -> Phases | None:
    """The recovered incident's MTTR in phases (None while it has not recovered). Each
    phase runs between two consecutive recorded instants; they add up to the MTTR when all are."""
    if incident.recovered is None:
        return None
    marks = [
        incident.evidence_at,
        incident.detected,
        incident.acted,
        incident.restarted,
        incident.restore_ended,
        incident.recovered,
    ]
    parts = [round(_seconds(a, b), 3) if a and b else None for a, b in itertools.pairwise(marks)]
    return Phases(*parts)


def median_phases(found: list[Phases]) -> Phases | None:
    """Each phase's median over the incidents that recorded it (None when none did)."""
    if not found:
        return None
    columns = zip(*(astuple(p) for p in found), strict=True)
    return Phases(*(round(statistics.median(known), 3) if (known := [v for v in c if v is not None]) else None
                    for c in columns))  # fmt: skip


@dataclass(frozen=True)
class IncidentTime:
    id: str
    fault: str
    node: str | None
    action: str
    mttr_seconds: float | None  # evidence → progress again; None while not recovered
    steps_lost: int | None
    phases: Phases | None = None  # mttr_seconds split: detect, decide, reschedule, restore, first step


@dataclass(frozen=True)
class Ettr:
    run_id: str
    starts: int
    wall_seconds: float
    productive_seconds: float
    restart_lost_seconds: float
    recompute_lost_seconds: float
    checkpoint_save_seconds: float
    checkpoints: int
    ettr: float | None  # None: nothing measured yet
    incidents: list[IncidentTime] = field(default_factory=list)
    mttr_seconds: float | None = None  # the mean over recovered incidents
    mttr_phases: Phases | None = None  # each phase's median over recovered incidents
    mtbf_seconds: float | None = None  # wall-clock / incidents
    advised_interval_seconds: float | None = None  # Young/Daly √(2·MTBF·save)
    running: bool = False


def _seconds(a: str, b: str) -> float:
    return (clock.parse(b) - clock.parse(a)).total_seconds()


def step_time(segment: Segment) -> float | None:
    """Seconds per step between a segment's first and last reported progress."""
    if segment.first is None or segment.last is None or segment.last.step <= segment.first.step:
        return None
    return _seconds(segment.first.at, segment.last.at) / (segment.last.step - segment.first.step)


def _losses(segments: list[Segment], tau: float) -> tuple[float, float]:
    restart = recompute = 0.0
    for before, after in itertools.pairwise(segments):
        own = step_time(before) or tau
        resumed = after.resumed_step if after.resumed_step is not None else 0
        if before.last is not None:
            recompute += max(0, before.last.step - resumed) * own
        gap_from = before.last.at if before.last is not None else before.started
        if after.first is not None:
            ahead = max(0, after.first.step - resumed) * (step_time(after) or own)
            restart += max(0.0, _seconds(gap_from, after.first.at) - ahead)
        elif after.ended is not None:  # a start that never progressed: all of it is lost
            restart += max(0.0, _seconds(gap_from, after.ended))
    return restart, recompute


def compute(timeline: Timeline, incidents: list[Incident]) -> Ettr:
    """ETTR and its parts (module docstring). An SLO's burn-rate alert is no failure of the run."""
    incidents = [i for i in incidents if i.slo is None]
    segments = timeline.segments
    if not segments:
        return Ettr(timeline.run_id, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, None)
    running = segments[-1].ended is None
    end = clock.now_utc() if running else segments[-1].ended
    assert end is not None
    wall = max(0.0, _seconds(segments[0].started, end))
    times = [t for t in (step_time(s) for s in segments) if t is not None]
    tau = sum(times) / len(times) if times else 0.0
    restart, recompute = _losses(segments, tau)
    productive = max(0.0, wall - restart - recompute)
    saves = [s for segment in segments for s in segment.save_seconds]
    rows = [IncidentTime(i.id, i.fault, i.node, i.action, i.mttr_seconds, i.steps_lost, phases(i)) for i in incidents]
    recovered = [r.mttr_seconds for r in rows if r.mttr_seconds is not None]
    mtbf = wall / len(incidents) if incidents else None
    save_mean = sum(saves) / len(saves) if saves else None
    advised = math.sqrt(2 * mtbf * save_mean) if mtbf and save_mean else None
    return Ettr(
        run_id=timeline.run_id,
        starts=len(segments),
        wall_seconds=round(wall, 3),
        productive_seconds=round(productive, 3),
        restart_lost_seconds=round(restart, 3),
        recompute_lost_seconds=round(recompute, 3),
        checkpoint_save_seconds=round(sum(saves), 3),
        checkpoints=len(saves),
        ettr=round(productive / wall, 4) if wall > 0 else None,
        incidents=rows,
        mttr_seconds=round(sum(recovered) / len(recovered), 3) if recovered else None,
        mttr_phases=median_phases([r.phases for r in rows if r.phases is not None]),
        mtbf_seconds=round(mtbf, 3) if mtbf is not None else None,
        advised_interval_seconds=round(advised, 1) if advised is not None else None,
        running=running,
    )


def from_incidents(incidents: list[Incident], *, started: str, now: str) -> float | None:
    """ETTR so far of a run without a timeline (Kubernetes: trainops does not see each start of
    the trainer), from its incidents: the time from each one's first evidence to the run's
    progress again (to now while it has not recovered) is lost; the rest of the time since the
    run's job was created is counted productive. None before any time has passed."""
    wall = _seconds(started, now)
    if wall <= 0:
        return None
    lost = sum(max(0.0, _seconds(max(i.evidence_at, started), i.recovered or now)) for i in incidents if i.slo is None)
    return round(max(0.0, wall - lost) / wall, 4)
