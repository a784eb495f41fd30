"""Per-rank progress the supervisor checks before it trusts it: the straggler detector acts on
a node, so what names the node and times the steps must hold up.

Sources: the trainer's output lines (trainops.faults.signals.metrics_line) and, when
train.faults.slowNode.progressFiles names them, files the ranks append the same JSON lines to
(one per rank, or shared; `{"step": N, "rank": R, "node": "gpu-3", "time": 1767225600.25}`),
followed from their start by `ProgressFiles` at every tick of the watchdog.

What is not trusted — each said once, as a warning on the run's result (FaultSession.warnings,
and stderr through logging), and the loop goes on:

- a line of a progress file that is not a progress line (torn JSON, no integer step, a rank
  that is not an integer): the line is skipped;
- a progress file that stops changing while the other sources still report (for
  `silent` seconds): its ranks are left out of the straggler check until it changes again —
  in synchronous training a rank that really stopped stops its peers at the next
  collective, which the hang clock sees; a file that stops alone is a broken report;
- a rank that never reports while ranks after it do (`silent` seconds after the first
  report of any rank): the straggler check compares the ranks that report;
- a rank whose `time` is ahead of this host's clock by more than `skew` seconds (clock skew
  between nodes): its times are not used, the supervisor's read times are;
- a `node` the scheduler did not give the job (not one of the job's nodes): a straggler on
  that rank is not acted on (trainops would exclude a node that is not the job's).
"""

from __future__ import annotations

import glob
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

SILENT = 10.0  # seconds a source may be silent while its peers report
SKEW = 2.0  # seconds a rank's clock may be ahead of the supervisor's
MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class RankReport:
    rank: int
    step: int
    node: str | None
    sent: float | None  # the rank's own time (Unix seconds), when it gives one


def parse_report(line: str) -> RankReport | str:
    """A progress line with a rank, or why it is not one (for the warning)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        return f"not JSON ({err.msg})"
    if not isinstance(data, dict):
        return "not a JSON object"
    step, rank, node, sent = data.get("step"), data.get("rank"), data.get("node"), data.get("time")
    if isinstance(step, bool) or not isinstance(step, int):
        return "no integer step"
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        return "no rank (an integer ≥ 0)"
    if node is not None and not (isinstance(node, str) and node):
        return "node is not a name"
    if sent is not None and (isinstance(sent, bool) or not isinstance(sent, (int, float))):
        return "time is not Unix seconds"
    return RankReport(rank, step, node, float(sent) if sent is not None else None)


@dataclass
class _File:
    offset: int = 0
    lines: int = 0
    partial: bytes = b""
    changed: float = field(default_factory=time.monotonic)
    ranks: set[int] = field(default_factory=set)
    stale: bool = False
    malformed: bool = False


class ProgressFiles:
    """Follows the files matching `patterns` (new ones as they appear), from their start."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self.files: dict[str, _File] = {}

    def poll(self) -> list[tuple[str, int, str]]:
        """The complete lines written since the last poll: (file, line number, text)."""
        out: list[tuple[str, int, str]] = []
        for pattern in self.patterns:
            for name in sorted(glob.glob(pattern)):
                state = self.files.setdefault(name, _File())
                try:
                    with Path(name).open("rb") as handle:
                        handle.seek(state.offset)
                        data = handle.read(1 << 20)
                except OSError:
                    continue
                if not data:
                    continue
                state.offset += len(data)
                state.changed = time.monotonic()
                *complete, state.partial = (state.partial + data).split(b"\n")
                if len(state.partial) > MAX_LINE:
                    state.partial = b""
                for raw in complete:
                    state.lines += 1
                    if raw.strip():
                        out.append((name, state.lines, raw.decode("utf-8", "replace").strip()))
        return out


class Trust:
    """What the module docstring says is not trusted, checked report by report; warns once each."""

    def __init__(
        self, *, nodes: list[str] | None, warn: Callable[[str], None], silent: float = SILENT, skew: float = SKEW
    ) -> None:
        self.nodes = set(nodes or [])
        self.warn, self.silent, self.skew = warn, silent, skew
        self.said: set[str] = set()
        self.untrusted_nodes: dict[int, str] = {}  # rank → the unknown node it named
        self.last: dict[int, float] = {}  # rank → monotonic time of its last report
        self.first: float | None = None

    def once(self, key: str, message: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self.warn(message)

    def when(self, report: RankReport, now: datetime) -> datetime:
        """The time the report counts at: the rank's own, unless it is ahead of this clock."""
        self.last[report.rank] = time.monotonic()
        self.first = self.first if self.first is not None else time.monotonic()
        if report.node and self.nodes and report.node not in self.nodes:
            self.untrusted_nodes[report.rank] = report.node
            self.once(
                f"node/{report.rank}/{report.node}",
                f"rank {report.rank} reports node {report.node}, which is "
                f"not a node of the job ({', '.join(sorted(self.nodes))}): a straggler there is not acted on",
            )
        if report.sent is None:
            return now
        ahead = report.sent - now.timestamp()
        if ahead > self.skew:
            where = f" on {report.node}" if report.node else ""
            self.once(
                f"skew/{report.rank}",
                f"rank {report.rank}{where} reports times {ahead:.1f} s ahead of this "
                f"host's clock (clock skew): its times are not used, the supervisor's read times are",
            )
            return now
        return datetime.fromtimestamp(report.sent, timezone.utc)

    def malformed(self, name: str, number: int, why: str) -> None:
        self.once(f"malformed/{name}", f"{name}:{number}: not a progress line ({why}): skipped (said once per file)")

    def stale(self, files: ProgressFiles) -> set[int]:
        """The ranks of files silent for `silent` seconds while another file changed (said once a
        file stops; the file counts again when it changes)."""
        now = time.monotonic()
        fresh = [f for f in files.files.values() if now - f.changed < self.silent]
        out: set[int] = set()
        for name, state in files.files.items():
            if now - state.changed < self.silent or not fresh or not state.ranks:
                if now - state.changed < self.silent and state.stale:
                    state.stale = False
                    self.said.discard(f"stale/{name}")
                continue
            state.stale = True
            out |= state.ranks
            ranks = ", ".join(str(r) for r in sorted(state.ranks))
            self.once(
                f"stale/{name}",
                f"{name} has not changed for {self.silent:g} s while other ranks report: "
                f"rank(s) {ranks} left out of the straggler check until it changes",
            )
        return out

    def missing(self) -> None:
        """Ranks below the highest one seen that never reported, `silent` seconds on."""
        if self.first is None or time.monotonic() - self.first < self.silent or not self.last:
            return
        for rank in range(max(self.last)):
            if rank not in self.last:
                self.once(
                    f"missing/{rank}",
                    f"rank {rank} has not reported in {self.silent:g} s while ranks up to "
                    f"{max(self.last)} have: the straggler check compares the ranks that report",
                )
