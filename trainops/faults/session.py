"""One run under fault supervision: each start of the trainer is a segment of the run's
timeline, watched by a Monitor; a failure becomes an incident with a decided action.

The executor (trainops.train.local / trainops.train.slurm_run) owns the loop: it asks
`start()` for the Monitor of the next start, runs the trainer with the Monitor's watchdog
and line tap, then `finish()` says what to do — and carries the action out (restart in
place, or the Slurm commands). The session writes the records: the timeline at each start
and end, the incident when the action is decided and again when the trainer progresses
after it (recovered, resumed from, steps lost).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from trainops import clock
from trainops.faults import incidents as records
from trainops.faults import timeline as timelines
from trainops.faults.actions import Action
from trainops.faults.catalog import bucket_for
from trainops.faults.detect import MAX_EVIDENCE, Diagnosis, Monitor
from trainops.faults.hang import ProgressClock
from trainops.faults.health import Follower, sources_for
from trainops.faults.incidents import Incident
from trainops.faults.nccl import flight_recorder_lines
from trainops.faults.timeline import Mark, Segment, Timeline
from trainops.faults.verify import EXCLUDING, NodeCheck, NodeProbe, keep_schedulable, reclassify
from trainops.manifest.common import duration_seconds

if TYPE_CHECKING:
    from trainops.manifest import Manifest
    from trainops.manifest.faults import FaultPolicy
    from trainops.registry.context import Registries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    action: Action | None  # None: the run ended cleanly (or by a scheduler's signal)
    diagnosis: Diagnosis | None
    incident: Incident | None
    note: str  # one line: the diagnosis and what was done


def decide(
    action: Action, *, node: str | None, run_id: str, past: list[Incident], policy: FaultPolicy, max_retry: int
) -> tuple[Action, str]:
    """The action the diagnosis gets after the node's record and the restart budget: a node
    with faults.drainAfter incidents in its window is drained; past faultTolerance.maxRetry
    restarts the run stops. The action, and why it changed (or "")."""
    threshold = policy.drain_after.incidents
    window = timedelta(seconds=duration_seconds(policy.drain_after.window))
    counts = {c.node: c for c in records.node_counts(past, threshold=threshold, window=window)}
    recent = (counts[node].in_window if node in counts else 0) + 1
    if node and action in ("restart", "requeue") and recent >= threshold:
        return "drain", f" (node {node}: {recent} incidents within {policy.drain_after.window})"
    mine = [i for i in past if i.run_id == run_id and i.action != "stop"]
    if action != "stop" and len(mine) >= max_retry:
        return "stop", f" (restarted {len(mine)} times; faultTolerance.maxRetry is {max_retry})"
    return action, ""


def _slow_again(diagnosis: Diagnosis, past: list[Incident]) -> str | None:
    """Why a slow node is drained rather than left again: it was slow before (an incident of
    class slow-node on the same node), or None."""
    if diagnosis.fault != "slow-node" or diagnosis.node is None:
        return None
    before = [i for i in past if i.fault == "slow-node" and i.node == diagnosis.node]
    if not before:
        return None
    return f" (node {diagnosis.node} was slow before: incident {before[-1].id}; drained, not just left)"


def this_node() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


class FaultSession:
    def __init__(
        self,
        manifest: Manifest,
        registries: Registries,
        *,
        run_id: str,
        job_id: str | None,
        nodes: list[str],
        hang: ProgressClock | None = None,
        probe: NodeProbe | None = None,
    ) -> None:
        self.manifest, self.registries, self.run_id, self.job_id = manifest, registries, run_id, job_id
        self.train = manifest.require_train()
        self.policy = self.train.faults
        self.nodes = nodes or [this_node()]
        self.hang = hang
        self.probe = probe  # the scheduler's word on a node, asked before one is excluded
        pipeline = manifest.pipeline.metadata.name
        self.repository = records.incidents_repository(
            registries, registry=manifest.pipeline.spec.registry, pipeline=pipeline
        )
        self.timeline: Timeline = timelines.load(
            registries, repository=self.repository, pipeline=pipeline, run_id=run_id
        )
        self.open = [
            i
            for i in records.list_incidents(registries, repository=self.repository, run_id=run_id)
            if i.recovered is None and i.action != "stop"
        ]
        self.restored: str | None = None
        self.monitor: Monitor | None = None
        self.follower: Follower | None = None
        self.warnings: list[str] = []

    # -- a start of the trainer ---------------------------------------------------------
    def start(self) -> Monitor:
        """The Monitor of the next start; the node-health sources are followed from now."""
        self.monitor = Monitor(policy=self.policy, node=self.nodes[0], hang=self.hang, nodes=self.nodes,
                               warn=self._warn)  # fmt: skip
        entries = [(s.file, s.command) for s in self.policy.node_health]
        self.follower = Follower(sources_for(entries, self.nodes), sink=self.monitor.on_health, warn=self._warn)
        self.follower.start()
        segment = Segment(job_id=self.job_id, node=self.nodes[0], started=clock.now_utc())
        self._store([*self.timeline.segments, segment])
        return self.monitor

    def resumed(self, step: int | None, ref: str | None) -> None:
        """The checkpoint the trainer resumes from (the restore is done, it starts now)."""
        self.restored = ref
        self._update(resumed_step=step, restore_ended=clock.now_utc())

    def saved(self, step: int, seconds: float) -> None:
        """A checkpoint was complete and pushed: progress, and its write time."""
        if self.monitor is not None:
            self.monitor.on_checkpoint(step)
        current = self.timeline.segments[-1]
        saves = [*current.save_seconds, round(seconds, 3)]
        segments = [*self.timeline.segments[:-1], current.model_copy(update={"save_seconds": saves})]
        self.timeline = self.timeline.model_copy(update={"segments": segments})

    def watchdog(self) -> str | None:
        """Asked every tick: close the incidents this start recovered from, then the Monitor's check."""
        assert self.monitor is not None
        if self.open and self.monitor.progress.first is not None:
            self._recovered()
        return self.monitor.check()

    def finish(self, *, code: int, passed_on: str | None) -> Decision:
        """The start ended: diagnose, decide (with the restart budget and the node's record),
        record the incident and the segment. The caller carries the action out."""
        assert self.monitor is not None and self.follower is not None
        self.follower.stop()
        if self.open and self.monitor.progress.first is not None:
            self._recovered()
        diagnosis = self.monitor.diagnose(code=code, passed_on=passed_on)
        if diagnosis is None:
            outcome = "completed" if code == 0 else (passed_on or f"exit {code}")
            self._end(outcome=outcome, incident=None)
            return Decision(None, None, None, outcome)
        diagnosis = self._flight_recorder(diagnosis)
        diagnosis, action, why, flagged = self._decide(diagnosis)
        incident = self._record(diagnosis, action, why, flagged=flagged)
        self._end(outcome=action, incident=incident.id)
        return Decision(action, diagnosis, incident, f"{diagnosis.summary} → {action}{why}")

    def close(self) -> None:
        if self.follower is not None:
            self.follower.stop()

    # -- decisions and records ----------------------------------------------------------
    def _decide(self, diagnosis: Diagnosis) -> tuple[Diagnosis, Action, str, bool]:
        """The diagnosis checked with the scheduler (trainops.faults.verify), the action after
        the restart budget and the node's record, why it changed, and whether the node is flagged."""
        check = self._check(diagnosis)
        if check is not None:
            diagnosis = reclassify(diagnosis, check, self.policy)
        past = records.list_incidents(self.registries, repository=self.repository)
        action, why = decide(
            diagnosis.action,
            node=diagnosis.node if diagnosis.fault != "task-killed" else None,  # not the node's doing
            run_id=self.run_id,
            past=past,
            policy=self.policy,
            max_retry=self.train.fault_tolerance.max_retry,
        )
        again = _slow_again(diagnosis, past) if action == "requeue" else None
        if again is not None:  # leaving it did not fix it last time: a person should look
            action, why = "drain", again
        flagged = action == "drain" and diagnosis.action != "drain"
        instead = keep_schedulable(action, check) if check is not None else None
        if instead is not None:
            action, why, flagged = instead[0], why + instead[1], True
        return diagnosis, action, why, flagged

    def _flight_recorder(self, diagnosis: Diagnosis) -> Diagnosis:
        """A hang or an NCCL timeout: what the flight-recorder dumps this start wrote say of it
        (train.faults.flightRecorder; trainops.faults.nccl), added to the evidence."""
        pattern = self.policy.flight_recorder
        if pattern is None or diagnosis.fault not in ("hang", "nccl-timeout"):
            return diagnosis

        since = clock.parse(self.timeline.segments[-1].started).timestamp()
        lines, bad = flight_recorder_lines(pattern, since=since)
        for problem in bad:
            self._warn(f"flight recorder: {problem}: skipped")
        if not lines:
            self._warn(f"flight recorder: no dump matching {pattern} was written by this start")
            return diagnosis
        return dataclasses.replace(diagnosis, evidence=[*diagnosis.evidence, *lines][:MAX_EVIDENCE])

    def _check(self, diagnosis: Diagnosis) -> NodeCheck | None:
        """The probe's answer for a node about to be excluded (None: nothing to ask, or no answer)."""
        if self.probe is None or diagnosis.node is None or diagnosis.action not in EXCLUDING:
            return None
        try:
            return self.probe(diagnosis.node)
        except Exception as err:  # no answer is no evidence: the diagnosis' action stands
            self._warn(f"could not ask the scheduler about node {diagnosis.node} before excluding it: {err}")
            return None

    def _record(self, diagnosis: Diagnosis, action: Action, why: str, *, flagged: bool) -> Incident:
        assert self.monitor is not None
        last = self.monitor.progress.last
        incident = Incident(
            id=records.next_id(self.registries, repository=self.repository, run_id=self.run_id),
            pipeline=self.manifest.pipeline.metadata.name,
            run_id=self.run_id,
            job_id=self.job_id,
            fault=diagnosis.fault,
            detail=diagnosis.detail,
            source=diagnosis.source,
            evidence=diagnosis.evidence,
            node=diagnosis.node,
            action=action,
            bucket=bucket_for(diagnosis.fault, diagnosis.detail),
            action_note=f"{action}{why}",
            evidence_at=clock.iso(diagnosis.detected),
            detected=clock.iso(self.monitor.stopped_at or clock.now()),
            acted=clock.now_utc(),  # the trainer has stopped: a restart in place is carried out from here
            last_step=last.step if last else None,
            node_flagged=flagged,
        )
        records.save(self.registries, repository=self.repository, incident=incident)
        self.open.append(incident)
        return incident

    def note_action(self, incident: Incident, note: str) -> None:
        """What carrying the action out did (the Slurm commands run), and when it was done, on the record."""
        updated = incident.model_copy(update={"action_note": note, "acted": clock.now_utc()})
        records.save(self.registries, repository=self.repository, incident=updated)
        self.open = [updated if i.id == incident.id else i for i in self.open]

    def _recovered(self) -> None:
        assert self.monitor is not None and self.monitor.progress.first is not None
        segment = self.timeline.segments[-1]
        first = self.monitor.progress.first
        still: list[Incident] = []
        for incident in self.open:
            if incident.recovered is not None:
                continue
            if clock.parse(incident.detected) > clock.parse(segment.started):
                still.append(incident)  # this start's own failure
                continue
            resumed = segment.resumed_step
            lost = incident.last_step - (resumed or 0) if incident.last_step is not None else None
            done = incident.model_copy(
                update={
                    "restarted": segment.started,
                    "restore_ended": segment.restore_ended,
                    "recovered": clock.iso(first.at),
                    "resumed_from": self.restored,
                    "resumed_step": resumed,
                    "steps_lost": max(0, lost) if lost is not None else None,
                }
            )
            records.save(self.registries, repository=self.repository, incident=done)
        self.open = still

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("trainops: %s", message)

    def _update(self, **fields: object) -> None:
        current = self.timeline.segments[-1].model_copy(update=fields)
        self._store([*self.timeline.segments[:-1], current])

    def _end(self, *, outcome: str, incident: str | None) -> None:
        assert self.monitor is not None
        progress = self.monitor.progress
        marks = {
            key: Mark(step=p.step, at=clock.iso(p.at)) if p is not None else None
            for key, p in (("first", progress.first), ("last", progress.last))
        }
        self._update(ended=clock.now_utc(), outcome=outcome, incident=incident, **marks)

    def _store(self, segments: list[Segment]) -> None:
        self.timeline = self.timeline.model_copy(update={"segments": segments})
        try:
            timelines.store(self.registries, repository=self.repository, timeline=self.timeline)
        except Exception as err:  # the timeline is bookkeeping: training goes on without it
            self._warn(f"could not record the run's timeline: {err}")
