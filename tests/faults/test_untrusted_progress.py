"""Per-rank progress trainops cannot trust (trainops.faults.progress): a torn progress file, a
file that stops changing, a rank that never reports, a rank whose clock is ahead, a node the
job does not have. Each is one warning, the straggler check takes no action on it, and the
watchdog goes on: a Monitor fed real files and lines in real time, as the supervisor feeds it."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

from trainops import clock
from trainops.faults.detect import Monitor
from trainops.manifest.faults import FaultPolicy

HOST = socket.gethostname().split(".")[0]


def _monitor(tmp_path: Path, warnings: list[str], *, nodes: list[str] | None = None) -> Monitor:
    policy = FaultPolicy.model_validate(
        {"slowNode": {"moveCost": "1s", "progressFiles": [str(tmp_path / "progress-*.jsonl")]}}
    )
    return Monitor(policy=policy, node=HOST, nodes=nodes or [HOST], warn=warnings.append, silent=0.6)


def _line(rank: int, step: int, *, node: str = HOST, ahead: float = 0.0) -> str:
    return json.dumps({"step": step, "rank": rank, "node": node, "time": time.time() + ahead})


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text + "\n")


def _run(monitor: Monitor, seconds: float, tick: Callable[[int], None]) -> list[str]:
    """Every 50 ms: `tick(n)` writes the ranks' progress, then the watchdog looks; what it said."""
    said = []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        tick(n)
        reason = monitor.check()
        if reason is not None:
            said.append(reason)
            break
        time.sleep(0.05)
    return said


def test_a_torn_line_in_a_progress_file_is_said_once_and_skipped(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)
    files = [tmp_path / f"progress-{r}.jsonl" for r in range(3)]

    def tick(n: int) -> None:
        for rank, path in enumerate(files):
            _append(path, _line(rank, n))
        if n in (3, 9):
            _append(files[1], '{"step": 4, "rank": 1, "node"')  # a writer killed mid-line, twice

    assert _run(monitor, 2.0, tick) == []
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{files[1]}:4: not a progress line (not JSON") and "said once" in warnings[0]
    assert monitor.stragglers.ranks[1].points[-1][0] > 9  # its good lines after the torn one still count


def test_a_progress_file_that_stops_is_left_out_not_acted_on(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)
    files = [tmp_path / f"progress-{r}.jsonl" for r in range(3)]

    def tick(n: int) -> None:
        for rank, path in enumerate(files):
            if rank != 2 or n < 10:  # rank 2's file stops after half a second
                _append(path, _line(rank, n))

    assert _run(monitor, 5.0, tick) == []  # with moveCost 1 s, a rank stalled that long would be left
    assert len(warnings) == 1, warnings
    assert f"{files[2]} has not changed for 0.6 s while other ranks report" in warnings[0]
    assert "rank(s) 2 left out of the straggler check" in warnings[0]
    assert 2 not in monitor.stragglers.ranks and monitor.evidence == []


def test_a_rank_that_never_reports_is_said_once(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)

    def tick(n: int) -> None:
        for rank in (0, 2, 3):  # rank 1 never reports
            monitor.on_line(_line(rank, n))

    assert _run(monitor, 1.5, tick) == []
    assert warnings == ["rank 1 has not reported in 0.6 s while ranks up to 3 have: the straggler check compares "
                        "the ranks that report"]  # fmt: skip
    assert sorted(monitor.stragglers.ranks) == [0, 2, 3]


def test_a_rank_whose_clock_is_ahead_is_timed_by_the_supervisor(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)

    def tick(n: int) -> None:
        monitor.on_line(_line(0, n))
        monitor.on_line(_line(1, n, ahead=60.0))  # its node's clock runs a minute ahead

    assert _run(monitor, 1.0, tick) == []
    assert len(warnings) == 1 and warnings[0].startswith(f"rank 1 on {HOST} reports times 6"), warnings
    assert "ahead of this host's clock (clock skew): its times are not used" in warnings[0]
    last = monitor.stragglers.ranks[1].points[-1][1]
    assert abs((last - clock.now()).total_seconds()) < 5  # read time, not a minute ahead


def test_a_straggler_on_a_node_the_job_does_not_have_is_not_acted_on(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)

    def tick(n: int) -> None:
        for rank in (0, 1, 2):
            monitor.on_line(_line(rank, n))
        if n % 3 == 0:  # a third of its peers' pace, on a node the job was not given
            monitor.on_line(_line(3, n // 3, node="gpu-99"))

    assert _run(monitor, 8.0, tick) == []
    assert warnings[0] == (f"rank 3 reports node gpu-99, which is not a node of the job ({HOST}): a straggler "
                           "there is not acted on")  # fmt: skip
    assert len(warnings) == 2 and warnings[1].startswith("not acted on: rank 3 on gpu-99 is"), warnings
    assert monitor.evidence == []
