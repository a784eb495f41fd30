"""The kill matrix of bench/reliability.py in its smallest form: one trial per cell.

trainops is SIGKILLed at a random moment of a push, a pull (both plain and chunked,
`--dedup chunks`), a `ckpt watch` and a `train submit` on every backend, and the registry
is restarted in the middle of a push; after a re-run every operation has completed, and no
reader ever saw a partial artifact or commit.
The full matrix (more trials, larger artifacts) is bench/reliability.py; with --doc it writes
docs/operations/results/reliability.json.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "reliability.py"


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_reliability", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_operation_survives_a_sigkill_and_completes_on_rerun() -> None:
    bench = _bench()
    seed = random.SystemRandom().randrange(2**31)
    rows = bench.run_matrix(trials=1, files=2, size=256 * 1024, seed=seed, backends=["file", "oci", "s3"])  # type: ignore[attr-defined]
    cells = {(r.backend, r.operation) for r in rows}
    assert {("file", "push"), ("oci", "pull"), ("s3", "ckpt watch"), ("git", "train submit")} <= cells
    assert ("oci", "push across a registry restart") in cells
    assert {(b, op) for b in ("file", "oci", "s3") for op in ("push (chunked)", "pull (chunked)")} <= cells
    for row in rows:
        assert row.trials >= 1
        assert row.partial_visible == 0, f"seed {seed}: {row}"
        assert row.completed == row.trials, f"seed {seed}: {row}"
