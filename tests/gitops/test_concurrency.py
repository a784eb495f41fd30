"""Several processes write different paths of one branch at the same moment, round after round.

Each round starts all writers together (a barrier), so their first pushes race for the
same tip: all but one are refused as non-fast-forward (or lose the ref lock) and must
fetch, re-apply and push again. Every write must land, and none may undo another's.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from pathlib import Path
from typing import Any

from trainops.gitops import history

from .helpers import clone, git

WRITERS = 4
ROUNDS = 3


def _writer(remote: str, index: int, barrier: Any, temp: str, queue: Any) -> None:
    os.environ["TMPDIR"] = temp
    tempfile.tempdir = temp
    from trainops.gitops import write_tree

    attempts = []
    try:
        for round_number in range(ROUNDS):
            barrier.wait(timeout=120)
            result = write_tree(
                repo=remote,
                branch="main",
                path=f"apps/w{index}",
                files={"round.yaml": f"writer: {index}\nround: {round_number}\n", f"r{round_number}.yaml": "x\n"},
                message=f"writer {index} round {round_number}",
                trailers={"Trainops-Writer": str(index), "Trainops-Round": str(round_number)},
                max_attempts=40,
            )
            assert result.changed
            attempts.append(result.attempts)
        queue.put((index, attempts, None))
    except BaseException as exc:  # reported to the test, which fails with it
        barrier.abort()
        queue.put((index, attempts, f"{type(exc).__name__}: {exc}"))


def test_concurrent_writers_all_land(git_remote: Path, tmp_path: Path, temp_root: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WRITERS)
    queue = context.Queue()
    workers = [
        context.Process(target=_writer, args=(str(git_remote), i, barrier, str(temp_root), queue))
        for i in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    reports = [queue.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    errors = [f"writer {i}: {error}" for i, _, error in reports if error and "BrokenBarrier" not in error]
    assert not errors, errors

    attempts = {i: tries for i, tries, _ in reports}
    assert all(len(tries) == ROUNDS for tries in attempts.values())
    assert max(t for tries in attempts.values() for t in tries) > 1, attempts  # somebody had to retry

    work = clone(git_remote, tmp_path / "final")
    assert git("rev-list", "--count", "HEAD", cwd=work) == str(WRITERS * ROUNDS)
    for i in range(WRITERS):
        names = sorted(p.name for p in (work / "apps" / f"w{i}").iterdir())
        assert names == ["r2.yaml", "round.yaml"]  # each round replaced the writer's whole directory
        assert (work / "apps" / f"w{i}" / "round.yaml").read_text() == f"writer: {i}\nround: {ROUNDS - 1}\n"
    entries = history(repo=str(git_remote), branch="main", limit=100)
    landed = sorted((e.trailers["Trainops-Writer"], e.trailers["Trainops-Round"]) for e in entries)
    assert landed == sorted((str(i), str(r)) for i in range(WRITERS) for r in range(ROUNDS))
    for i in range(WRITERS):  # each writer's rounds landed in order
        rounds = [e.trailers["Trainops-Round"] for e in entries if e.trailers["Trainops-Writer"] == str(i)]
        assert rounds == [str(r) for r in reversed(range(ROUNDS))]
