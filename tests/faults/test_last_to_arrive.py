"""Who arrives last at NCCL's collectives (trainops.faults.straggler.Arrivals), read from the
NCCL Inspector's JSON-mode files (trainops.faults.nccl): files written in the plugin's format
(one record a line, per rank and collective) in a temporary directory, read by the Monitor as
the supervisor runs it. A rank its peers wait for at most collectives is named with its node
and left once their waiting reaches the cost of moving; noise never is; a torn record and a
file that stops are one warning each, and no action is taken on what stopped."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from trainops.faults.detect import Monitor
from trainops.manifest.faults import FaultPolicy

KERNEL_US = 40_000.0  # a collective's own time, when every rank arrives together


class Ranks:
    """`ranks` processes, one per node (node-R), each appending the Inspector's records of
    the collectives of one communicator to <dir>/node-R-pid<pid>.log."""

    def __init__(self, directory: Path, ranks: int, *, seed: int = 3) -> None:
        self.files = [directory / f"node-{r}-pid{4100 + r}.log" for r in range(ranks)]
        self.rng = random.Random(seed)
        self.sn = 0
        self.clock_us = 1_764_900_000_000_000
        self.stopped: set[int] = set()

    def collectives(self, count: int, *, late: dict[int, float] | None = None, jitter: float = 0.1) -> None:
        """`count` AllReduces; `late`: rank → (µs it arrives after the others, the share of the
        collectives it is late at); `jitter`: each rank's kernel time ± that share."""
        for _ in range(count):
            self.sn += 1
            delay = {r: us for r, (us, share) in (late or {}).items() if self.rng.random() < share}
            wait = max(delay.values(), default=0.0)
            self.clock_us += int(KERNEL_US + wait + 1000)
            for rank in range(len(self.files)):
                if rank in self.stopped:
                    continue
                took = KERNEL_US * (1 + self.rng.uniform(-jitter, jitter)) + wait - delay.get(rank, 0.0)
                record = {
                    "header": {"id": "0x7f8c496ae9f661", "rank": rank, "n_ranks": len(self.files), "nnodes": 4},
                    "metadata": {
                        "inspector_output_format_version": "v4.0",
                        "git_rev": "",
                        "rec_mechanism": "nccl_profiler_interface",
                        "dump_timestamp_us": self.clock_us,
                        "hostname": f"node-{rank}",
                        "pid": 4100 + rank,
                    },
                    "coll_perf": {
                        "coll": "AllReduce",
                        "coll_sn": self.sn,
                        "coll_msg_size_bytes": 268435456,
                        "coll_exec_time_us": round(took),
                        "coll_timing_source": "kernel_gpu",
                        "coll_algobw_gbs": 268435456 / took / 1000,
                        "coll_busbw_gbs": 268435456 / took / 1000 * 1.5,
                    },
                }
                self.append(rank, json.dumps(record, separators=(",", ":")))

    def append(self, rank: int, line: str) -> None:
        with self.files[rank].open("a") as handle:
            handle.write(line + "\n")


def _monitor(directory: Path, warnings: list[str], *, move_cost: str = "1s", silent: float = 10.0) -> Monitor:
    policy = FaultPolicy.model_validate(
        {"slowNode": {"moveCost": move_cost, "ncclInspector": [str(directory / "node-*-pid*.log")]}}
    )
    return Monitor(
        policy=policy, node="node-0", nodes=[f"node-{r}" for r in range(4)], warn=warnings.append, silent=silent
    )


def _checks(monitor: Monitor, ranks: Ranks, rounds: int, **kwargs: object) -> tuple[list[str], list[list[int]]]:
    """Each round: five collectives, then one check; what the checks said, and who was last to
    arrive (straggling) after each."""
    said: list[str] = []
    straggling: list[list[int]] = []
    for _ in range(rounds):
        ranks.collectives(5, **kwargs)  # type: ignore[arg-type]
        reason = monitor.check()
        straggling.append(monitor.arrivals.straggling())
        if reason is not None:
            said.append(reason)
            break
    return said, straggling


def test_a_rank_its_peers_wait_for_is_named_with_its_node_and_left(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)
    ranks = Ranks(tmp_path, 4)
    # rank 2 arrives 60 ms late at 80 % of the collectives (a duty-cycled throttle is not late at all)
    said, straggling = _checks(monitor, ranks, 40, late={2: (60_000.0, 0.8)})
    assert len(said) == 1, (said, straggling[-5:])
    assert said[0].startswith("slow-node: by its NCCL collectives, rank 2 on node-2 arrived last at "), said
    # tolerated first: named as straggling for checks before the waiting reached the 1 s to move
    assert [2] in straggling[:-1], straggling
    # 1 s of waiting at ~60 ms a collective, 80 % of five collectives a check: ≥ 4 checks after entering
    assert len(straggling) >= 4 + 3
    [diagnosis] = [monitor.diagnose(code=1, passed_on=None)]
    assert diagnosis is not None and (diagnosis.fault, diagnosis.node) == ("slow-node", "node-2")
    assert warnings == []


def test_noise_and_a_rank_late_now_and_then_are_never_named(tmp_path: Path) -> None:
    for ranks_n, late in ((2, None), (4, None), (4, {1: (60_000.0, 0.3)})):
        directory = tmp_path / f"{ranks_n}-{late is not None}"
        directory.mkdir()
        warnings: list[str] = []
        monitor = _monitor(directory, warnings)
        ranks = Ranks(directory, ranks_n, seed=ranks_n)
        said, straggling = _checks(monitor, ranks, 120, late=late, jitter=0.25)
        assert said == [] and not any(straggling), (ranks_n, late, said)
        assert len(monitor.arrivals.recent) == monitor.arrivals.settings.recent  # the collectives were compared


def test_a_torn_record_is_one_warning_and_the_rest_still_count(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings)
    ranks = Ranks(tmp_path, 4)
    ranks.collectives(3)
    ranks.append(1, '{"header":{"id":"0x7f8c496ae9f661","rank":1,"n_ranks":4},"coll_perf":{"coll":"AllRed')
    ranks.append(1, '{"header":{"id":"0x7f8c496ae9f661","rank":1,"n_ranks":4},"coll_perf":{"coll_sn":"x"}}')
    said, _ = _checks(monitor, ranks, 40, late={2: (60_000.0, 0.8)})
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{ranks.files[1]}: not NCCL Inspector output (line 4: not JSON)"), warnings
    assert len(said) == 1 and "rank 2 on node-2 arrived last" in said[0], said


def test_a_file_that_stops_is_one_warning_and_nothing_is_done_on_what_came_before(tmp_path: Path) -> None:
    warnings: list[str] = []
    monitor = _monitor(tmp_path, warnings, move_cost="30s", silent=0.3)
    ranks = Ranks(tmp_path, 4)
    said, straggling = _checks(monitor, ranks, 16, late={2: (60_000.0, 0.8)})
    assert said == [] and straggling[-1] == [2]  # straggling, tolerated: 30 s of waiting not reached
    ranks.stopped.add(2)  # rank 2's file stops; the others go on past `silent`
    deadline = time.monotonic() + 10
    while not warnings and time.monotonic() < deadline:
        said += _checks(monitor, ranks, 1)[0]
    assert len(warnings) == 1 and "has not changed for 0.3 s" in warnings[0], warnings
    assert str(ranks.files[2]) in warnings[0]
    assert monitor.arrivals.straggling() == [] and not monitor.arrivals.recent
    said += _checks(monitor, ranks, 10)[0]
    assert said == [] and len(warnings) == 1, (said, warnings)
