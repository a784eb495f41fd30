"""Benchmarks cannot rot: each has a quick mode, and CI runs them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_benchmark_has_a_quick_mode_that_ci_runs() -> None:
    scripts = sorted((REPO / "bench").glob("*.py"))
    assert scripts
    for script in scripts:
        helped = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False)
        assert helped.returncode == 0 and "--quick" in helped.stdout, f"{script.name} has no --quick"
    runner = (REPO / "scripts" / "bench-quick.sh").read_text()
    assert "bench/*.py" in runner and "--quick" in runner
    assert "scripts/bench-quick.sh" in (REPO / ".ci" / "run").read_text()
