"""The committed results of a benchmark: docs/operations/results/<benchmark>.json, from which
scripts/gen_docs.py generates the tables of the operations pages (docs/operations/*.md). A
benchmark run with `--doc` writes its file (bench/results/ keeps the full samples, uncommitted):

    {"benchmark": "startup", "title": "…", "command": "python bench/startup.py -n 20",
     "machine": "2 CPUs (…), Linux x86_64, Python 3.11.7",
     "load": "load average 0.71 at the start, 0.65 at the end",
     "date": "2026-12-05T02:21:48Z", "columns": ["…", …], "rows": [["…", …], …]}

Every cell is text, as the table shows it. `load` and `machine` say where and under what
load it was measured, since the figures depend on both; `date` is null for figures whose
date was not recorded.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "operations" / "results"
KEYS = ("benchmark", "title", "command", "machine", "load", "date", "columns", "rows")


def default_path(benchmark: str) -> Path:
    return RESULTS / f"{benchmark}.json"


def machine() -> str:
    """CPUs, CPU model, OS, architecture and Python of this machine, in one line."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = f" ({line.split(':', 1)[1].strip()})"
                break
    except OSError:
        pass
    python = sys.version.split()[0]
    return f"{os.cpu_count()} CPUs{model}, {platform.system()} {platform.machine()}, Python {python}"


class Load:
    """The 1-minute load average when the benchmark started and when it ended."""

    def __init__(self) -> None:
        self.start = os.getloadavg()[0]
        self.end: float | None = None

    @classmethod
    def between(cls, start: float, end: float) -> Load:
        """The load a benchmark measured itself, at its start and its end."""
        load = cls()
        load.start, load.end = start, end
        return load

    def text(self) -> str:
        end = os.getloadavg()[0] if self.end is None else self.end
        return f"load average {self.start:.2f} at the start, {end:.2f} at the end"


def write(
    path: Path,
    *,
    benchmark: str,
    title: str,
    load: Load,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    command: str | None = None,
) -> None:
    """Write the committed results of a run. The command is this process's own argv unless
    given (a run that drew a random seed names it, so that the command repeats the run)."""
    argv = [a for a in sys.argv[1:] if not a.startswith("--doc")]
    doc = {
        "benchmark": benchmark,
        "title": title,
        "command": command or " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *argv]),
        "machine": machine(),
        "load": load.text(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "columns": list(columns),
        "rows": [[str(cell) for cell in row] for row in rows],
    }
    assert all(len(row) == len(columns) for row in doc["rows"]), "every row has a cell per column"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}: regenerate the docs with python scripts/gen_docs.py")


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The rows as the Markdown table a run prints (scripts/gen_docs.py renders the committed one)."""
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])
