"""Which tests each pass of scripts/run-tests.sh runs (tests/conftest.py): a parallel worker
leaves out `alone` and `after_all` tests, the `alone` pass keeps only the `alone` ones, and one
process runs everything with `after_all` last. Collected by a real pytest on real test files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALONE = "tests/faults/test_slow_node.py"  # marked alone
LEAKS = "tests/leaks/test_planted_secrets.py"
AFTER_ALL = f"{LEAKS}::test_no_planted_secret_outside_its_source"  # marked after_all
PLAIN = "tests/test_runid.py"


def _collected(tmp_path: Path, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "TRAINOPS_TESTS_ALONE")}
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    done = subprocess.run(
        [*argv, "--basetemp", str(tmp_path / "t"), ALONE, LEAKS, PLAIN],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def _files(ids: list[str]) -> set[str]:
    return {node.split("::")[0] for node in ids}


def test_one_process_runs_every_test_and_the_scan_last(tmp_path: Path) -> None:
    ids = _collected(tmp_path)
    assert _files(ids) == {ALONE, LEAKS, PLAIN} and ids[-1] == AFTER_ALL, ids


def test_a_worker_leaves_out_alone_and_after_all_tests(tmp_path: Path) -> None:
    ids = _collected(tmp_path, PYTEST_XDIST_WORKER="gw0")
    assert _files(ids) == {LEAKS, PLAIN} and AFTER_ALL not in ids, ids


def test_the_alone_pass_keeps_only_alone_tests(tmp_path: Path) -> None:
    ids = _collected(tmp_path, TRAINOPS_TESTS_ALONE="1")
    assert ids and _files(ids) == {ALONE}, ids
    # a caller's `-n` in run-tests.sh's arguments makes the alone pass parallel too: still them
    assert _collected(tmp_path, TRAINOPS_TESTS_ALONE="1", PYTEST_XDIST_WORKER="gw0") == ids
