"""Startup cost of the CLI: `trainops --help` against the bare `python -c "import click, yaml"`,
and three commands on the hot path, whose time is mostly start-up: a re-push of unchanged
content (digest cache warm), `ckpt latest` and `registry ls` of three checkpoints, all on
file://.

The commands run alternately, N times each, so that drift in the machine's load hits them
alike. For each it reports the median and minimum wall time and the peak RSS (from the
child's own rusage, via os.wait4), then the ratio of the medians of the first two, whose
target is <= 2.0 (trainops may at most double the cost of the two libraries every command
needs), and the hot-path medians against their targets (re-push <= 0.3 s, `ckpt latest`
and `registry ls` <= 0.5 s; bench/registry.py times the re-push on oci://, bench/scale.py
`ckpt latest` among 10,000 checkpoints).

    python bench/startup.py [-n 20] [--check]

Writes bench/results/startup.json (bench/results/ is not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import docresult

TARGET_RATIO = 2.0
HOT_TARGETS = {"re-push unchanged": 0.3, "ckpt latest": 0.5, "registry ls": 0.5}  # seconds, median wall
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "startup.json"


@dataclass(frozen=True)
class Sample:
    seconds: float
    max_rss_kib: int


@dataclass(frozen=True)
class Summary:
    name: str
    command: list[str]
    runs: int
    median_s: float
    min_s: float
    max_s: float
    peak_rss_mib: float
    median_rss_mib: float


def trainops_command(*args: str) -> list[str]:
    """The console script next to this interpreter (what a user runs), else `-m`."""
    script = Path(sys.executable).with_name("trainops")
    if script.is_file():
        return [str(script), *args]
    found = shutil.which("trainops")
    if found:
        return [found, *args]
    return [sys.executable, "-m", "trainops.cli.main", *args]


def hot_path(work: Path, quick: bool) -> dict[str, list[str]]:
    """Commands of the hot path, their data made in work: a file pushed once (so the
    digest cache is warm and the registry has it) and three checkpoints."""
    data = work / "weights.bin"
    with data.open("wb") as fh:
        for _ in range(1 if quick else 64):  # MiB
            fh.write(os.urandom(1024 * 1024))
    repo = f"file://{work / 'registry'}/bench"
    push = trainops_command("push", str(data), f"{repo}/model:v1", "-o", "json")
    measure(push)
    for step in (100, 200, 300):
        ckpt = [str(data), f"{repo}/ckpt:step-{step}", "--kind", "checkpoint", "--step", str(step)]
        measure(trainops_command("push", *ckpt, "--metric", f"loss={1000 / step:.3f}"))
    return {
        "re-push unchanged": push,
        "ckpt latest": trainops_command("ckpt", "latest", f"{repo}/ckpt"),
        "registry ls": trainops_command("registry", "ls", f"{repo}/ckpt"),
    }


def measure(command: list[str]) -> Sample:
    """One run: wall time and the child's own peak RSS (ru_maxrss is KiB on Linux)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{stderr}")
    rss = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss // 1024
    return Sample(seconds, int(rss))


def summarize(name: str, command: list[str], samples: list[Sample]) -> Summary:
    times = [s.seconds for s in samples]
    rss = [s.max_rss_kib / 1024 for s in samples]
    return Summary(
        name=name,
        command=command,
        runs=len(samples),
        median_s=statistics.median(times),
        min_s=min(times),
        max_s=max(times),
        peak_rss_mib=max(rss),
        median_rss_mib=statistics.median(rss),
    )


def _write_doc(summaries: list[Summary], ratio: float, hot: dict[str, bool], load: docresult.Load) -> None:
    """The committed results (docs/operations/results/startup.json) the performance page shows."""
    trainops, baseline = summaries[:2]

    def ms(s: Summary) -> str:
        return f"{s.median_s * 1e3:.1f} ms [{s.min_s * 1e3:.1f}–{s.max_s * 1e3:.1f}], {s.peak_rss_mib:.1f} MiB"

    rows = [
        [
            f"`{trainops.name}`",
            ms(trainops),
            f"`{baseline.name}` {ms(baseline)}",
            f"{ratio:.2f}",
            f"≤ {TARGET_RATIO} {'✓' if ratio <= TARGET_RATIO else '✗'}",
        ]
    ]
    for s in summaries[2:]:
        rows.append([s.name, ms(s), "—", "—", f"≤ {HOT_TARGETS[s.name]} s {'✓' if hot[s.name] else '✗'}"])
    docresult.write(
        docresult.default_path("startup"),
        benchmark="startup",
        title="Start-up and the hot paths (median [min–max] wall time, peak RSS)",
        load=load,
        columns=["command", "trainops", "floor", "ratio", "target"],
        rows=rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs of each command")
    parser.add_argument("--output", type=Path, default=RESULTS, help="JSON results file")
    parser.add_argument("--check", action="store_true", help=f"exit 1 when the ratio exceeds {TARGET_RATIO}")
    parser.add_argument("--quick", action="store_true", help="3 runs, seconds: checks the benchmark runs; no results")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/startup.json")
    args = parser.parse_args(argv)
    load = docresult.Load()
    if args.quick:
        args.runs = 3
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="trainops-startup-") as tmp:
        os.environ["TRAINOPS_CACHE_DIR"] = str(Path(tmp) / "cache")  # the children's digest cache
        os.environ["PYTHONPATH"] = str(ROOT)  # this tree's trainops, as the other benchmarks run it
        commands = {
            "trainops --help": trainops_command("--help"),
            "import click, yaml": [sys.executable, "-c", "import click, yaml"],
            **hot_path(Path(tmp), args.quick),
        }
        for command in commands.values():  # warm the OS file cache and .pyc files
            measure(command)
        samples: dict[str, list[Sample]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                samples[name].append(measure(command))

    summaries = [summarize(name, commands[name], samples[name]) for name in commands]
    trainops, baseline = summaries[:2]
    ratio = trainops.median_s / baseline.median_s
    ok = ratio <= TARGET_RATIO
    hot = {s.name: s.median_s <= HOT_TARGETS[s.name] for s in summaries[2:]}

    print(f"{'command':<22} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'peak RSS MiB':>13}")
    for s in summaries:
        print(
            f"{s.name:<22} {s.median_s * 1e3:>10.1f} {s.min_s * 1e3:>8.1f} "
            f"{s.max_s * 1e3:>8.1f} {s.peak_rss_mib:>13.1f}"
        )
    print(
        f"ratio of medians: {ratio:.2f} (target <= {TARGET_RATIO}: {'ok' if ok else 'OVER'}); "
        f"RSS ratio {trainops.peak_rss_mib / baseline.peak_rss_mib:.2f}; {args.runs} runs each"
    )
    for name, met in hot.items():
        print(f"{name}: target <= {HOT_TARGETS[name]} s: {'ok' if met else 'OVER'}")
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))

    if args.quick:
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "startup",
        "runs": args.runs,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "target_ratio": TARGET_RATIO,
        "ratio": ratio,
        "ok": ok,
        "hot_targets_s": HOT_TARGETS,
        "hot_ok": hot,
        "load_average": os.getloadavg(),
        "commands": [asdict(s) for s in summaries],
        "samples": {name: [asdict(s) for s in values] for name, values in samples.items()},
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    if args.doc:
        _write_doc(summaries, ratio, hot, load)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
