"""The monitor: every signal of a running trainer in one place, and the diagnosis when it ends.

The supervisor (trainops.supervise) hands the monitor each line the trainer writes; the
node-health followers hand it kernel and DCGM lines; the checkpoint watcher tells it each
checkpoint; its watchdog (`check`, asked every tick) stops the trainer as soon as a signal
arrives or progress stops for hangTimeout. `diagnose` then names the cause — the most
specific signal seen, else what the exit status says — and the action the policy gives it.
Each signal is stamped with the moment the monitor read it: that is the detection time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from trainops import clock
from trainops.faults.actions import Action, action_for
from trainops.faults.hang import ProgressClock
from trainops.faults.nccl import InspectorFiles
from trainops.faults.progress import SILENT, ProgressFiles, RankReport, Trust, parse_report
from trainops.faults.signals import (
    MEANINGS,
    SRUN_TASK_KILLED,
    Signal,
    Source,
    classify_line,
    exit_signal,
    metrics_line,
    most_specific,
    nan_signal,
)
from trainops.faults.straggler import Arrivals, Detector, LastToArrive, Settings, Straggler
from trainops.manifest.common import duration_seconds

if TYPE_CHECKING:
    from trainops.manifest.faults import FaultPolicy

MAX_EVIDENCE = 20
MAX_LINE = 500
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evidence:
    signal: Signal
    at: datetime


@dataclass(frozen=True)
class Point:
    """Progress: a step the trainer reported (metrics line or checkpoint), and when."""

    step: int
    at: datetime


@dataclass(frozen=True)
class Diagnosis:
    fault: str
    action: Action
    node: str | None
    detail: str
    source: str
    evidence: list[str]
    detected: datetime  # when the first evidence of this class was read

    @property
    def summary(self) -> str:
        where = f" on {self.node}" if self.node else ""
        return f"{self.fault}{where}: {self.detail}"


@dataclass
class Progress:
    first: Point | None = None
    last: Point | None = None
    checkpoints: list[Point] = field(default_factory=list)


class Monitor:
    """Signals of one trainer start (thread-safe: the output readers and health followers
    feed it from their threads, the supervisor asks it on its own)."""

    def __init__(
        self,
        *,
        policy: FaultPolicy | None,
        node: str | None,
        hang: ProgressClock | None = None,
        nodes: list[str] | None = None,
        warn: Callable[[str], None] | None = None,
        silent: float = SILENT,
    ) -> None:
        """`nodes`: the job's (a rank naming another is not trusted); `warn`: where what is not
        trusted is said (trainops.faults.progress)."""
        self.policy, self.node, self.hang = policy, node, hang
        self.lock = threading.Lock()
        self.evidence: list[Evidence] = []
        self.progress = Progress()
        self.stopped_for: str | None = None
        self.stopped_at: datetime | None = None  # when the watchdog acted
        self.exception: str | None = None  # the last exception line of a traceback the trainer wrote
        self._in_traceback: dict[str, bool] = {}  # per stream: inside a traceback, before its last line
        self.stragglers = Detector(_straggler_settings(policy))  # fed by per-rank progress lines
        self.trust = Trust(nodes=nodes, warn=warn or (lambda text: log.warning("trainops: %s", text)), silent=silent)
        patterns = list(policy.slow_node.progress_files) if policy is not None else []
        self.files = ProgressFiles(patterns) if patterns else None
        inspector = list(policy.slow_node.nccl_inspector) if policy is not None else []
        self.inspector = InspectorFiles(inspector) if inspector else None
        self.nccl_stragglers = Detector(_straggler_settings(policy))  # fed by the NCCL Inspector's collectives
        self.arrivals = Arrivals(_straggler_settings(policy))  # …and by who arrives last at them

    # -- feeding ------------------------------------------------------------------------
    def on_line(self, line: str, stream: str = "stdout") -> None:
        """A line of the trainer's output: a metrics line (progress, NaN) or evidence."""
        point = metrics_line(line)
        if point is not None:
            self._advance(point.step)
            if point.rank is not None and point.final:
                with self.lock:  # done: no longer a peer, nor slow for having stopped
                    self.stragglers.finish(point.rank)
            elif point.rank is not None:
                report = parse_report(line.strip())
                if isinstance(report, RankReport):
                    self._rank(report)
            found = nan_signal(point, line, node=self.node)
        else:
            found = classify_line(line, source="trainer", node=self.node)
            self._note_exception(line, stream)
        if found is not None:
            self._add(found)

    def _note_exception(self, line: str, stream: str) -> None:
        """Keep the line that names the exception of a Python traceback (`ValueError: …`):
        the first unindented line after `Traceback (most recent call last):`."""
        text = line.rstrip("\r\n")
        if text.startswith("Traceback (most recent call last):"):
            self._in_traceback[stream] = True
        elif self._in_traceback.get(stream) and text and not text[0].isspace():
            self._in_traceback[stream] = False
            with self.lock:
                self.exception = text if len(text) <= MAX_LINE else text[:MAX_LINE] + "…"

    def _rank(self, report: RankReport) -> None:
        at = self.trust.when(report, clock.now())
        with self.lock:
            self.stragglers.step(report.rank, report.step, at, node=report.node)

    def _read_files(self) -> set[int]:
        """New lines of the progress files; the ranks of files that stopped (not trusted)."""
        if self.files is None:
            return set()
        for name, number, text in self.files.poll():
            report = parse_report(text)
            if isinstance(report, str):
                self.trust.malformed(name, number, report)
                continue
            self.files.files[name].ranks.add(report.rank)
            self._advance(report.step)
            self._rank(report)
        return self.trust.stale(self.files)

    def _read_inspector(self) -> None:
        """The NCCL Inspector's new collectives: each rank's progress in its widest communicator,
        and each collective's ranks for who arrived last; a JSON-mode file silent while the
        others grow leaves its ranks out, and the arrivals seen so far with them."""
        if self.inspector is None:
            return
        fresh, bad, read = self.inspector.poll()
        for name, why in bad:
            self.trust.once(f"inspector/{name}", f"{name}: not NCCL Inspector output ({why}): skipped")
        stale = self.trust.stale(self.inspector.lines)
        with self.lock:
            for item in read:
                if item.exec_us is not None:
                    host = item.host.split(".")[0] if item.host else None
                    key = (item.comm, item.collective, item.sn)
                    self.arrivals.collective(item.rank, key, item.nranks, item.exec_us / 1e6, node=host)
            if stale:
                self.arrivals.forget()
                for rank in stale:
                    self.nccl_stragglers.forget(rank)
        for item in fresh:
            host = item.host.split(".")[0] if item.host else None
            report = RankReport(item.rank, item.sn, host, item.at.timestamp() if item.at is not None else None)
            at = self.trust.when(report, clock.now())
            with self.lock:
                self.nccl_stragglers.step(item.rank, item.sn, at, node=host)

    def _straggler(self, stale: set[int]) -> tuple[Straggler | LastToArrive, Source] | None:
        """The straggler worth leaving, by the trainer's progress or by NCCL's collectives (both
        detectors checked every tick: their hysteresis counts checks), on a node trusted."""
        self._read_inspector()
        with self.lock:
            for rank in stale:
                self.stragglers.forget(rank)
            now = clock.now()
            verdicts: list[tuple[Straggler | LastToArrive | None, Source]] = [
                (self.stragglers.check(now), "progress"),
                (self.nccl_stragglers.check(now), "nccl"),
                (self.arrivals.check(now), "nccl"),
            ]
        for slow, source in verdicts:
            if slow is None:
                continue
            if slow.rank in self.trust.untrusted_nodes:
                self.trust.once(f"act/{slow.rank}", f"not acted on: {slow.summary} (rank {slow.rank}'s node is not "
                                "the job's)")  # fmt: skip
                continue
            return slow, source
        return None

    def on_health(self, line: str, node: str) -> None:
        found = classify_line(line, source="node-health", node=node)
        if found is not None:
            self._add(found)

    def on_checkpoint(self, step: int) -> None:
        now = clock.now()
        with self.lock:
            self.progress.checkpoints.append(Point(step, now))
        self._advance(step, now)

    def _advance(self, step: int, now: datetime | None = None) -> None:
        point = Point(step, now or clock.now())
        if self.hang is not None:
            self.hang.touch()
        with self.lock:
            if self.progress.first is None:
                self.progress.first = point
            if self.progress.last is None or step >= self.progress.last.step:
                self.progress.last = point

    def _add(self, found: Signal) -> None:
        text = found.line if len(found.line) <= MAX_LINE else found.line[:MAX_LINE] + "…"
        with self.lock:
            if self.stopped_at is not None and found.fault != "hang":
                return  # what stopping the trainer caused (srun: "task 0: Killed") is no evidence of the cause
            if len(self.evidence) < MAX_EVIDENCE:
                kept = Signal(found.fault, found.source, text, found.node, found.detail)
                self.evidence.append(Evidence(kept, clock.now()))

    # -- asking -------------------------------------------------------------------------
    def check(self) -> str | None:
        """The watchdog: why the trainer must stop now (a signal arrived, or it hung), or None."""
        if self.stopped_for is not None:
            return self.stopped_for
        reason = self._reason()
        if reason is not None:
            self.stopped_for, self.stopped_at = reason, clock.now()
        return reason

    def _reason(self) -> str | None:
        with self.lock:
            seen = [e.signal for e in self.evidence]
        if seen:
            cause = most_specific(seen)
            assert cause is not None
            return f"{cause.fault}: {cause.detail or MEANINGS[cause.fault]}"
        stale = self._read_files()
        self.trust.missing()
        found = self._straggler(stale)
        if found is not None:  # tolerated until it cost what moving costs: leave its node
            slow, source = found
            said = slow.summary if source == "progress" else f"by its NCCL collectives, {slow.summary}"
            self._add(Signal("slow-node", source, said, slow.node, MEANINGS["slow-node"]))
            for line in self.inspector.compare(slow.rank) if self.inspector is not None else []:
                self._add(Signal("slow-node", "nccl", line, slow.node, MEANINGS["slow-node"]))
            return f"slow-node: {said}"
        reason = self.hang() if self.hang is not None else None
        if reason is None:
            return None
        self._add(Signal("hang", "progress", reason, self.node, MEANINGS["hang"]))
        return f"hang: {reason}"

    def diagnose(self, *, code: int, passed_on: str | None) -> Diagnosis | None:
        """The failure's cause and action, or None for a clean end (exit 0, or a signal the
        scheduler sent — time limit, preemption, cancel — with no fault seen)."""
        with self.lock:
            seen = list(self.evidence)
        if passed_on is not None:  # srun's tasks killed by the signal passed on are its doing, not a fault
            seen = [e for e in seen if not SRUN_TASK_KILLED.search(e.signal.line)]
        if not seen and (code == 0 or passed_on is not None):
            return None
        if seen:
            cause = most_specific([e.signal for e in seen])
            assert cause is not None
        else:
            cause = exit_signal(code, node=self.node)
            seen = [Evidence(cause, clock.now())]
            if self.exception is not None:  # what the trainer said it died of, before its status
                seen.insert(
                    0, Evidence(Signal(cause.fault, "trainer", self.exception, cause.node, cause.detail), seen[0].at)
                )
        same = [e for e in seen if e.signal.fault == cause.fault]
        lines = [e.signal.line for e in same] + [e.signal.line for e in seen if e.signal.fault != cause.fault]
        return Diagnosis(
            fault=cause.fault,
            action=action_for(cause.fault, self.policy),
            node=cause.node or self.node,
            detail=cause.detail or MEANINGS[cause.fault],
            source=cause.source,
            evidence=lines[:MAX_EVIDENCE],
            detected=min(e.at for e in same),
        )


def _straggler_settings(policy: FaultPolicy | None) -> Settings:
    """The detector's settings from train.faults.slowNode (defaults without a policy)."""

    if policy is None:
        return Settings()
    slow = policy.slow_node
    return Settings(ratio=slow.ratio, move_seconds=duration_seconds(slow.move_cost))
