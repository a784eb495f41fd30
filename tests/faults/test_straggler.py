"""The straggler detector and its ski-rental policy (trainops.faults.straggler), fed per-rank
step completions on a simulated clock: noise never acts, a 2× slower rank is named within a
few checks and left once the time lost to it reaches the cost of moving, a rank that
recovers within that budget is never left."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from trainops.faults.straggler import Detector, Settings, Straggler

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _run(
    detector: Detector,
    *,
    ranks: int,
    seconds: int,
    step: float = 0.1,
    jitter: float = 0.1,
    slow: dict[int, float] | None = None,
    slow_between: tuple[float, float] = (0.0, float("inf")),
    seed: int = 7,
    done: dict[int, int] | None = None,
    late: dict[int, float] | None = None,
    says_done: bool = False,
) -> tuple[list[tuple[int, Straggler]], list[tuple[float, list[int]]]]:
    """Each rank trains for `seconds` (step time `step`, ±jitter uniform noise; ranks in
    `slow` slower by their factor between the two times, ranks in `done` stopping at that
    step — saying so with their last line when `says_done` —, ranks in `late` starting that
    many seconds late), one check a second; what the checks returned (and when), and who
    straggled when."""
    rng = random.Random(seed)
    clocks = {rank: (late or {}).get(rank, 0.0) for rank in range(ranks)}
    steps = dict.fromkeys(range(ranks), 0)
    found: list[tuple[int, Straggler]] = []
    straggling: list[tuple[float, list[int]]] = []
    for second in range(1, seconds + 1):
        for rank in range(ranks):
            while clocks[rank] < second and steps[rank] < (done or {}).get(rank, 1 << 62):
                factor = (slow or {}).get(rank, 1.0) if slow_between[0] <= clocks[rank] < slow_between[1] else 1.0
                clocks[rank] += step * factor * (1 + rng.uniform(-jitter, jitter))
                steps[rank] += 1
                if steps[rank] % 5 == 0:  # a progress line every 5 steps
                    detector.step(rank, steps[rank], START + timedelta(seconds=clocks[rank]), node=f"node-{rank}")
                if says_done and steps[rank] == (done or {}).get(rank):
                    detector.finish(rank)  # its final line
        result = detector.check(START + timedelta(seconds=second))
        if result is not None:
            found.append((second, result))
        straggling.append((second, detector.straggling()))
    return found, straggling


def test_noise_alone_never_acts_nor_flags() -> None:
    for ranks in (2, 3, 8):
        detector = Detector(Settings(move_seconds=5))
        found, straggling = _run(detector, ranks=ranks, seconds=3000, jitter=0.25, seed=ranks)
        assert found == [], found[:1]
        assert all(not who for _, who in straggling), [s for s in straggling if s[1]][:3]


def test_a_rank_twice_as_slow_is_named_then_left_after_the_move_cost() -> None:
    detector = Detector(Settings(move_seconds=30))
    found, straggling = _run(detector, ranks=8, seconds=200, slow={5: 2.0}, slow_between=(20, 1e9))
    first = next(second for second, who in straggling if who)
    assert [who for second, who in straggling if second == first] == [[5]]
    assert first - 20 <= 10, first  # detection within ten checks (its window, then `enter` checks)
    when, left = found[0]
    assert (left.rank, left.node) == (5, "node-5") and 1.8 < left.slowdown < 2.2, left
    # ski rental: at 2× half of every second is lost, so the 30 s move cost is paid ~60 s after detection
    assert 55 <= when - first <= 65 and left.lost_seconds >= 30, (when, first, left)
    assert left.summary.startswith("rank 5 on node-5 is 1.9") or left.summary.startswith("rank 5 on node-5 is 2.0")


def test_a_rank_that_recovers_within_the_budget_is_never_left() -> None:
    detector = Detector(Settings(move_seconds=60))
    found, straggling = _run(detector, ranks=4, seconds=300, slow={2: 2.0}, slow_between=(30, 60))
    assert found == []
    assert any(who == [2] for _, who in straggling)  # it was seen…
    assert straggling[-1][1] == []  # …and forgiven once it ran at its peers' pace again


def test_a_slowdown_below_the_ratio_is_tolerated_as_noise() -> None:
    detector = Detector(Settings(move_seconds=5))
    found, straggling = _run(detector, ranks=6, seconds=600, slow={1: 1.1}, jitter=0.05)
    assert found == [] and all(not who for _, who in straggling)


def test_a_rank_that_says_it_finished_is_not_slow() -> None:
    """Ranks started seconds apart finish seconds apart: the first one done stops reporting
    (its step time would grow with every check) while its peers still train. Its final line
    takes it out of the comparison; without it, it would be left as a straggler."""
    for ranks in (2, 3, 8):
        late = dict.fromkeys(range(1, ranks), 15.0)  # rank 0 started (so finishes) 15 s before the rest
        done = dict.fromkeys(range(ranks), 600)
        detector = Detector(Settings(move_seconds=3))
        found, straggling = _run(detector, ranks=ranks, seconds=73, done=done, late=late, seed=ranks, says_done=True)
        assert found == [], found[:1]
        assert all(not who for _, who in straggling), [s for s in straggling if s[1]][:3]
        silent, _ = _run(Detector(Settings(move_seconds=3)), ranks=ranks, seconds=73, done=done, late=late, seed=ranks)
        assert silent and silent[0][1].rank == 0, silent[:1]


def test_a_rank_that_stops_reporting_behind_its_peers_is_slow() -> None:
    """A rank stalled mid-run (not finished: its peers are past its step) grows slower with
    every check and is left once it has cost the move."""
    detector = Detector(Settings(move_seconds=5))
    found, _ = _run(detector, ranks=4, seconds=60, done={3: 200})
    assert found and found[0][1].rank == 3, found[:1]
