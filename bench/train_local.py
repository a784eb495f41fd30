"""What `trainops train run --local` adds to a training run.

The same tiny-llm training (N steps, a checkpoint every K) runs two ways, alternately,
R times each, in fresh directories:

- **plain**: `python -m tiny_llm.train` with TRAINOPS_CKPT_DIR set — the training alone;
- **trainops**: `trainops train run --local` on a file:// registry — restore step, the same
  training, and the checkpoint watcher pushing every checkpoint with lineage and applying
  retention, plus the final scan after the trainer exits.

It reports the median wall time of each, the ratio, the peak RSS (os.wait4's ru_maxrss:
the largest single process of the tree, trainer or trainops) and how many checkpoints
reached the registry.

    python bench/train_local.py [--steps 3000] [--every 300] [-r 3]

Writes bench/results/train_local.json (bench/results/ is not committed).
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

import yaml
from harness import docresult

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "train_local.json"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "TINY_LLM_"))}


def _timed(argv: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of a command; stdout and stderr go to files."""
    with open(cwd / "out.log", "w+b") as out, open(cwd / "err.log", "w+b") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode()[-2000:]}")
        return seconds, int(usage.ru_maxrss), out.read().decode()


def plain(work: Path, steps: int, every: int) -> float:
    env = _env() | {
        "TRAINOPS_CKPT_DIR": str(work / "ckpt"),
        "TRAINOPS_MAX_STEPS": str(steps),
        "TRAINOPS_CKPT_EVERY": str(every),
        "TRAINOPS_RUN_ID": "plain",
    }
    return _timed([sys.executable, "-m", "tiny_llm.train"], cwd=work, env=env)[0]


def with_trainops(work: Path, steps: int, every: int) -> tuple[float, int, int]:
    manifest = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "bench"},
        "spec": {
            "image": {"template": "train-pytorch"},
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [sys.executable, "-m", "tiny_llm.train"],
                "env": {"TRAINOPS_MAX_STEPS": str(steps), "TRAINOPS_CKPT_EVERY": str(every)},
                "checkpoint": {"layout": "trainops", "keep": {"last": 3, "best": 1, "metric": "val_loss"}},
            },
        },
    }
    (work / "trainops.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    script = Path(sys.executable).with_name("trainops")
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "trainops.cli.main"]
    command = [*argv, "train", "run", "--local", "--run-id", "bench", "-o", "json"]
    seconds, rss, out = _timed(command, cwd=work, env=_env())
    return seconds, rss, len(json.loads(out)["pushed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--every", type=int, default=300)
    parser.add_argument("-r", "--runs", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="300 steps, one run: checks the benchmark runs; no results"
    )
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/train_local.json")
    args = parser.parse_args()
    load = docresult.Load()
    if args.quick:
        args.steps, args.every, args.runs = 300, 100, 1
    plain_s: list[float] = []
    ours_s: list[float] = []
    rss: list[int] = []
    pushed = 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            plain_s.append(plain(Path(a), args.steps, args.every))
            seconds, peak, pushed = with_trainops(Path(b), args.steps, args.every)
            ours_s.append(seconds)
            rss.append(peak)
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "steps": args.steps,
        "checkpoint_every": args.every,
        "runs": args.runs,
        "plain_median_s": round(statistics.median(plain_s), 3),
        "trainops_median_s": round(statistics.median(ours_s), 3),
        "ratio": round(statistics.median(ours_s) / statistics.median(plain_s), 3),
        "added_s": round(statistics.median(ours_s) - statistics.median(plain_s), 3),
        "trainops_peak_rss_mib": round(max(rss) / 1024, 1),
        "checkpoints_pushed": pushed,
    }
    print(json.dumps(result, indent=2))
    if pushed < 1:
        raise SystemExit("train_local: trainops pushed no checkpoint")
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if args.doc and not args.quick:
        docresult.write(
            docresult.default_path("train_local"),
            benchmark="train_local",
            title=f"What train run --local adds to a training run (median of {args.runs})",
            load=load,
            columns=["benchmark", "trainops", "peer", "ratio", "target"],
            rows=[
                [
                    f"{args.steps}-step tiny-llm training, {pushed} checkpoints pushed",
                    f"`train run --local` {result['trainops_median_s']:.2f} s, {result['trainops_peak_rss_mib']} MiB",
                    f"the trainer alone {result['plain_median_s']:.2f} s",
                    f"{result['ratio']:.2f} ({result['added_s']:.2f} s added)",
                    "—",
                ]
            ],
        )


if __name__ == "__main__":
    main()
