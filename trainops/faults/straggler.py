"""Slow ranks: per-rank progress, a straggler detector robust to noise, and the policy that
decides when a slow node is worth leaving.

**Progress.** Each rank reports its step completions (a metrics line with `"rank"`, and
`"node"` when the trainer knows it); a rank's step time is the time since its oldest report
within the last `window` seconds divided by the steps since — by time, not by a count of
reports, so that a stall shorter than the window (a duty cycle, a noisy neighbour's burst)
shows as the slowdown it averages to, and a rank that stops reporting grows slower.

**Detection.** At each check a rank's step time is compared with its peers' (every other
rank): with m their median and MAD their median absolute deviation, the rank is slow when
its step time is above m·`ratio` and its robust z-score (x − m) / (1.4826·MAD) is above `z`,
MAD floored at `noise`·m so that near-identical peers do not turn jitter into a verdict.
A rank that said it finished (its last metrics line, `"final": true` with its `rank`) leaves
the comparison: it stops reporting, and its step time would grow as a stalled rank's does
(independent replicas started seconds apart also finish seconds apart).
Hysteresis: a rank becomes a straggler after `enter` slow checks in a row and stops being
one after `leave` checks below m·`ratio_leave`; one slow check among normal ones is noise.

**Policy (ski rental).** Leaving a slow node costs a restart (`move_seconds`: the run's
time to recover, its MTTR when known); staying costs, per second, the share of the
run's time the straggler wastes (1 − 1/slowdown: every rank waits for it). Like renting
skis until the rent paid equals the price, the run tolerates the straggler until the time
it has lost to it reaches `move_seconds`, then excludes the node. Never losing more than
twice what the best choice in hindsight would have lost (the deterministic rule's
competitive ratio of 2), it needs no guess of how long the slowness lasts — seconds or
hours, as measured in production. A rank that recovers within that budget costs nothing.

**Last to arrive** (`Arrivals`, fed by the NCCL Inspector's per-collective records,
trainops.faults.nccl). In a collective every rank waits for the last one to arrive: the GPU
kernel of a rank that arrived early runs while it waits, so of one collective's records
(one per rank, matched by communicator, collective and `coll_sn`) the last to arrive has the
shortest execution time, and what its peers waited for it is their median time minus its own —
both measured on each rank's own clock, so clock skew between nodes does not enter. A
collective counts against a rank when its peers waited more than `margin` of their median
time (closer than that, no rank was last). Over the last `recent` complete collectives, a rank
last at a share of them ≥ `share` is slow at that check, below `share_leave` normal; the same
hysteresis (`enter`, `leave`) and ski rental follow, the time lost being what its peers waited
for it, collective by collective, while it straggles.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

MAD_SCALE = 1.4826  # MAD → standard deviation for normal noise


@dataclass(frozen=True)
class Settings:
    window: float = 10.0  # seconds of each rank's progress in its step time
    ratio: float = 1.3  # slow: above the peers' median by this factor…
    ratio_leave: float = 1.15  # …and no longer slow below this one
    z: float = 3.5  # …and this many robust standard deviations
    noise: float = 0.05  # the MAD's floor, as a share of the median
    enter: int = 3  # slow checks in a row to become a straggler
    leave: int = 3  # normal checks in a row to stop being one
    move_seconds: float = 60.0  # what leaving the node costs (the run's MTTR when known)
    recent: int = 50  # last to arrive: the complete collectives compared…
    share: float = 0.6  # …a rank last at this share of them is slow…
    share_leave: float = 0.4  # …and no longer slow below this one
    margin: float = 0.2  # a collective's last rank: its peers waited this share of their median time


@dataclass
class _Rank:
    node: str | None = None
    points: deque[tuple[int, datetime]] = field(default_factory=deque)  # (step, when), oldest first
    slow_checks: int = 0
    normal_checks: int = 0
    straggling_since: datetime | None = None
    lost_seconds: float = 0.0  # run time lost to this rank while it straggles
    finished: bool = False  # it said it finished: out of every comparison


def _hysteresis(state: _Rank, slow: bool, normal: bool, cfg: Settings, now: datetime) -> None:
    """One check's verdict on a rank: its slow or normal checks in a row, and whether it
    starts (`enter` slow checks) or stops (`leave` normal ones) straggling."""
    if slow:
        state.slow_checks, state.normal_checks = state.slow_checks + 1, 0
    elif normal:
        state.normal_checks, state.slow_checks = state.normal_checks + 1, 0
    else:
        state.slow_checks = 0  # between the two thresholds: neither enters nor leaves
    if state.straggling_since is None and state.slow_checks >= cfg.enter:
        state.straggling_since, state.lost_seconds = now, 0.0
    elif state.straggling_since is not None and state.normal_checks >= cfg.leave:
        state.straggling_since, state.lost_seconds = None, 0.0


@dataclass(frozen=True)
class Straggler:
    rank: int
    node: str | None
    step_seconds: float
    peers_seconds: float  # the peers' median step time
    since: datetime
    lost_seconds: float  # time lost to it so far
    move_seconds: float

    @property
    def slowdown(self) -> float:
        return self.step_seconds / self.peers_seconds

    @property
    def summary(self) -> str:
        what = (
            f"is {self.slowdown:.2f}× slower than its peers' median "
            f"({self.step_seconds:.3f} s against {self.peers_seconds:.3f} s a step)"
        )
        return _verdict(self.rank, self.node, what, self.lost_seconds, self.move_seconds)


def _verdict(rank: int, node: str | None, what: str, lost: float, move: float) -> str:
    where = f" on {node}" if node else ""
    return f"rank {rank}{where} {what}; {lost:.0f} s lost ≥ {move:.0f} s to move"


class Detector:
    """Feed it step completions per rank; `check` says which rank to leave, if any."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.ranks: dict[int, _Rank] = {}
        self.checked: datetime | None = None

    def step(self, rank: int, step: int, at: datetime, node: str | None = None) -> None:
        """Rank `rank` completed `step` at `at`."""
        state = self.ranks.setdefault(rank, _Rank())
        if node:
            state.node = node
        if not state.points or step > state.points[-1][0]:
            state.points.append((step, at))

    def forget(self, rank: int) -> None:
        """Leave a rank out (its reports are not trusted) until it reports again."""
        self.ranks.pop(rank, None)

    def finish(self, rank: int) -> None:
        """Rank `rank` finished (its last line): it is neither a peer nor slow from now on."""
        self.ranks.setdefault(rank, _Rank()).finished = True

    def times(self, now: datetime) -> dict[int, float]:
        """Each rank's step time (seconds) over the window before `now`, for ranks with two
        reports in it at least (the oldest report before the window start is its anchor)."""
        start = now - timedelta(seconds=self.settings.window)
        out = {}
        for rank, state in self.ranks.items():
            if state.finished:
                continue
            points = state.points
            while len(points) > 2 and points[1][1] <= start:
                points.popleft()
            if len(points) >= 2 and points[-1][0] > points[0][0]:
                seconds = (now - points[0][1]).total_seconds()
                out[rank] = max(seconds, 0.0) / (points[-1][0] - points[0][0])
        return out

    def check(self, now: datetime) -> Straggler | None:
        """One check: update every rank's hysteresis and lost time; the straggler whose lost
        time has reached the cost of moving (the one that lost most), or None."""
        cfg = self.settings
        times = self.times(now)
        elapsed = (now - self.checked).total_seconds() if self.checked is not None else 0.0
        self.checked = now
        due: list[Straggler] = []
        for rank, mine in times.items():
            peers = [t for r, t in times.items() if r != rank]
            if not peers:
                continue
            median = statistics.median(peers)
            mad = statistics.median([abs(t - median) for t in peers])
            spread = max(MAD_SCALE * mad, cfg.noise * median)
            state = self.ranks[rank]
            slow = mine > median * cfg.ratio and (mine - median) / spread > cfg.z
            _hysteresis(state, slow, mine < median * cfg.ratio_leave, cfg, now)
            if state.straggling_since is None:
                continue
            state.lost_seconds += elapsed * max(0.0, 1 - median / mine)
            if state.lost_seconds >= cfg.move_seconds:
                due.append(
                    Straggler(
                        rank, state.node, mine, median, state.straggling_since, state.lost_seconds, cfg.move_seconds
                    )
                )
        return max(due, key=lambda s: s.lost_seconds) if due else None

    def straggling(self) -> list[int]:
        """The ranks currently straggling (tolerated, not yet worth leaving)."""
        return sorted(r for r, s in self.ranks.items() if s.straggling_since is not None)


@dataclass(frozen=True)
class LastToArrive:
    """A rank that arrives last at its collectives (`Arrivals`), worth leaving."""

    rank: int
    node: str | None
    last: int  # of the last `collectives` complete collectives, it arrived last at this many
    collectives: int
    waited_seconds: float  # what its peers waited for it at each of those (median)
    since: datetime
    lost_seconds: float
    move_seconds: float

    @property
    def summary(self) -> str:
        what = (
            f"arrived last at {self.last} of the last {self.collectives} collectives, "
            f"its peers waiting {self.waited_seconds * 1000:.1f} ms a collective for it"
        )
        return _verdict(self.rank, self.node, what, self.lost_seconds, self.move_seconds)


@dataclass(frozen=True)
class _Complete:
    last: int | None  # the rank its peers waited for, or None (no rank was last by the margin)
    waited: float  # seconds its peers waited for it (median)


class Arrivals:
    """Feed it each rank's record of each collective; `check` says which rank to leave, if any."""

    MAX_PENDING = 4096  # collectives some rank has not reported yet

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.ranks: dict[int, _Rank] = {}
        self.pending: dict[tuple[str, str, int], dict[int, float]] = {}
        self.recent: deque[_Complete] = deque(maxlen=self.settings.recent)
        self.fresh: list[_Complete] = []  # complete since the last check

    def collective(
        self, rank: int, key: tuple[str, str, int], nranks: int, seconds: float, node: str | None = None
    ) -> None:
        """Rank `rank`'s record of the collective `key` (communicator, collective, sequence
        number) of a communicator of `nranks` ranks: its execution time in `seconds`."""
        state = self.ranks.setdefault(rank, _Rank())
        if node:
            state.node = node
        if nranks < 2:
            return
        times = self.pending.setdefault(key, {})
        times[rank] = seconds
        if len(times) < nranks:
            while len(self.pending) > self.MAX_PENDING:
                self.pending.pop(next(iter(self.pending)))
            return
        del self.pending[key]
        last = min(times, key=lambda r: times[r])
        median = statistics.median([t for r, t in times.items() if r != last])
        waited = median - times[last]
        done = _Complete(last if waited > self.settings.margin * median else None, max(waited, 0.0))
        self.recent.append(done)
        self.fresh.append(done)

    def forget(self) -> None:
        """Drop the evidence (a source is not trusted): collectives and every rank's checks."""
        self.pending.clear()
        self.recent.clear()
        self.fresh.clear()
        for state in self.ranks.values():
            state.slow_checks = state.normal_checks = 0
            state.straggling_since, state.lost_seconds = None, 0.0

    def check(self, now: datetime) -> LastToArrive | None:
        """One check: each rank's share of last arrivals among the recent collectives, its
        hysteresis and lost time; the rank worth leaving (the one that lost most), or None."""
        cfg = self.settings
        fresh, self.fresh = self.fresh, []
        if len(self.recent) < cfg.recent:
            return None  # too few collectives yet to call anyone last "in most"
        due: list[LastToArrive] = []
        for rank, state in self.ranks.items():
            mine = [c for c in self.recent if c.last == rank]
            share = len(mine) / len(self.recent)
            _hysteresis(state, share >= cfg.share, share < cfg.share_leave, cfg, now)
            if state.straggling_since is None:
                continue
            state.lost_seconds += sum(c.waited for c in fresh if c.last == rank)
            if state.lost_seconds >= cfg.move_seconds:
                waited = statistics.median(c.waited for c in mine) if mine else 0.0
                due.append(
                    LastToArrive(rank, state.node, len(mine), len(self.recent), waited, state.straggling_since,
                                 state.lost_seconds, cfg.move_seconds)
                )  # fmt: skip
        return max(due, key=lambda s: s.lost_seconds) if due else None

    def straggling(self) -> list[int]:
        """The ranks currently last to arrive (tolerated, not yet worth leaving)."""
        return sorted(r for r, s in self.ranks.items() if s.straggling_since is not None)
