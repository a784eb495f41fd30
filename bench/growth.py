"""How the cost of push and pull grows: time and peak memory at 1, 10 and 100 files and at
16 MiB, 256 MiB and 1 GiB in all, plain and (one file) chunked (`--dedup chunks`), on
oci:// (a Distribution registry on a free loopback port) or file://.

Each cell pushes a fresh directory of random files (the total split evenly among them) with
a cold digest cache, then pulls it into an empty directory (every byte verified), each as
its own process: wall time from this script, peak RSS from GNU time. Memory must stay flat
as sizes grow: transfers stream. Writes bench/results/growth.json.

    python bench/growth.py                  # 16 MiB, 256 MiB, 1 GiB × 1, 10, 100 files, oci
    python bench/growth.py --backend file
    python bench/growth.py --counts 1       # one file per cell: plain against chunked
    python bench/growth.py --quick          # 1 and 8 MiB × 1 and 10 files: seconds (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.services import DistributionRegistry  # noqa: E402

PY = sys.executable
MIB = 1024 * 1024


@dataclass
class Cell:
    files: int
    total_mib: int
    push_seconds: float
    push_rss_mb: float
    pull_seconds: float
    pull_rss_mb: float
    dedup: str = "off"  # chunks: pushed with --dedup chunks, pulled by rebuilding from packs

    @property
    def push_mib_s(self) -> float:
        return self.total_mib / self.push_seconds

    @property
    def pull_mib_s(self) -> float:
        return self.total_mib / self.pull_seconds


def make_tree(root: Path, files: int, total: int) -> None:
    root.mkdir(parents=True)
    each = total // files
    for i in range(files):
        with (root / f"shard-{i:03d}.safetensors").open("wb") as fh:
            left = each
            while left:
                piece = os.urandom(min(left, 8 * MIB))
                fh.write(piece)
                left -= len(piece)


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of a command."""
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[2:6])}… failed ({proc.returncode}):\n{proc.stderr.decode()[-2000:]}")
    peak_kb = int(proc.stderr.decode().strip().splitlines()[-1])
    return round(elapsed, 3), round(peak_kb / 1024, 1)


def cell(work: Path, registry: str, files: int, total_mib: int, env: dict[str, str], dedup: str = "off") -> Cell:
    name = f"c{files}x{total_mib}{'-chunked' if dedup != 'off' else ''}"
    src = work / name
    make_tree(src, files, total_mib * MIB)
    cli = [PY, "-m", "trainops.cli.main"]
    shutil.rmtree(env["TRAINOPS_CACHE_DIR"], ignore_errors=True)  # cold: every file is hashed
    push = run([*cli, "push", str(src), f"{registry}/growth/{name}:v1", "-o", "json", "--dedup", dedup], env)
    pull = run([*cli, "pull", f"{registry}/growth/{name}:v1", str(work / f"{name}-out"), "-o", "json"], env)
    shutil.rmtree(src)
    shutil.rmtree(work / f"{name}-out")
    return Cell(files, total_mib, push[0], push[1], pull[0], pull[1], dedup)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backend", choices=["oci", "file"], default="oci")
    parser.add_argument("--quick", action="store_true", help="1 and 8 MiB × 1 and 10 files")
    parser.add_argument("--counts", default=None, help="file counts of the plain cells, e.g. 1,10 (default 1,10,100)")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/growth.json")
    args = parser.parse_args()
    load = docresult.Load()
    sizes, counts = ([1, 8], [1, 10]) if args.quick else ([16, 256, 1024], [1, 10, 100])
    if args.counts:
        counts = [int(n) for n in args.counts.split(",")]
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="trainops-growth-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "TRAINOPS_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
        reg: DistributionRegistry | None = None
        if args.backend == "oci":
            reg = DistributionRegistry(work / "registry-data")
            reg.start()
            env["TRAINOPS_INSECURE_REGISTRIES"] = reg.host
            registry = f"oci://{reg.host}"
        else:
            registry = f"file://{work / 'registry'}"
        try:
            for total in sizes:
                for files, dedup in [*((n, "off") for n in counts), (1, "chunks")]:
                    c = cell(work, registry, files, total, env, dedup)
                    cells.append(c)
                    print(
                        f"{files:4} files {total:5} MiB{' chunked' if dedup != 'off' else '        '}"
                        f"  push {c.push_seconds:6.2f}s {c.push_rss_mb:5.0f} MB"
                        f"  pull {c.pull_seconds:6.2f}s {c.pull_rss_mb:5.0f} MB",
                        flush=True,
                    )
        finally:
            if reg is not None:
                reg.stop()
    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "backend": args.backend,
        "cells": [asdict(c) for c in cells],
    }
    (out / f"growth-{args.backend}.json").write_text(json.dumps(summary, indent=2))
    if args.doc and not args.quick:
        write_doc(cells, args.backend, load)


def _size(mib: int) -> str:
    return f"{mib // 1024} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib} MiB"


def write_doc(cells: list[Cell], backend: str, load: docresult.Load) -> None:
    """The committed results (docs/operations/results/growth.json) the performance page shows."""
    rows = [
        [
            f"{'chunked ' if c.dedup != 'off' else ''}{c.files} × {_size(c.total_mib)}",
            f"{c.push_seconds:.2f} s",
            f"{c.push_rss_mb:.0f} MB",
            f"{c.pull_seconds:.2f} s",
            f"{c.pull_rss_mb:.0f} MB",
        ]
        for c in cells
    ]
    docresult.write(
        docresult.default_path("growth"),
        benchmark="growth",
        title=f"Push and pull cost as files and sizes grow ({backend}://, cold digest cache, every byte verified)",
        load=load,
        columns=["files × total", "push", "push peak RSS", "pull", "pull peak RSS"],
        rows=rows,
    )


if __name__ == "__main__":
    main()
