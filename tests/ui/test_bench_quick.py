"""bench/ui_index.py --quick runs end to end (the numbers themselves are the bench's job)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainops_testing.cli import REPO

pytestmark = pytest.mark.slow


def test_ui_index_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "ui_index.json"
    argv = [sys.executable, "bench/ui_index.py", "--quick", "--results", str(out)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["artifacts"] == 500
    assert set(result["pages"]) == {
        "page_html",
        "page_api",
        "artifact_html",
        "artifact_api",
        "lineage_api",
        "curve_api",
    }
    assert all(stats["n"] == 10 for stats in result["pages"].values())
