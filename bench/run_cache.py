"""What `trainops run` costs when nothing changed, and what stage keys cost on a big tree.

Two measurements, each beside a peer, in one run:

- **no-op run**: tiny-llm (a copy, in a git repository) is run once (`trainops run`: image
  skipped, training, checkpoint), then `trainops run` again, R times, with nothing changed:
  every stage is found in the registry by its key. Peer: `trainops validate` on the same
  manifest, the floor of any command that reads it (interpreter, pydantic, the manifest).
  Target: the no-op run ≤ 2 s.
- **stage keys of 10,000 files**: the source digest `trainops run` keys the image and train
  stages with (`trainops.pipeline.keys.source_digest`), cold (every file hashed) and warm
  (the digest cache: a stat per file). Peer: `git status --porcelain` on the same tree with
  a warm index, git's own stat cache. Target: warm ≤ 1 s.

    python bench/run_cache.py [--files 10000] [-r 5]
    python bench/run_cache.py --quick     # seconds: 2,000 files, 100 training steps, 2 runs

Writes bench/results/run_cache.json (bench/results/ is not committed).
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
from pathlib import Path
from typing import Any

import yaml
from harness import docresult

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "tiny-llm"
RESULTS = REPO / "bench" / "results" / "run_cache.json"
TRAINOPS = [sys.executable, "-m", "trainops.cli.main"]


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "TINY_LLM_", "GITHUB_", "CI_"))}
    env.update(
        TRAINOPS_CACHE_DIR=str(cache),
        DOCKER_HOST=f"unix://{cache}/no-engine.sock",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@trainops.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@trainops.invalid",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


CPU: dict[str, list[float]] = {}  # argv[3] or the command → CPU seconds (user + sys) of each run


def _timed(argv: list[str], *, cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds of a command; its CPU seconds (children included) go to CPU.

    On a shared machine the wall time moves with the load; the CPU time much less, so both
    are reported.
    """
    with open(cwd.parent / "bench.err", "w+b") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode()[-2000:]}")
    name = argv[3] if argv[:3] == TRAINOPS else argv[0]
    CPU.setdefault(name, []).append(usage.ru_utime + usage.ru_stime)
    return seconds


def _project(root: Path, steps: int) -> None:
    shutil.copytree(EXAMPLE / "tiny_llm", root / "tiny_llm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXAMPLE / "data", root / "data")
    doc: dict[str, Any] = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "tiny-llm"},
        "spec": {
            "image": {"builder": "docker", "include": ["tiny_llm/**", "data/**"], "exclude": ["**/__pycache__/**"]},
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [sys.executable, "-m", "tiny_llm.train"],
                "env": {"TRAINOPS_MAX_STEPS": str(steps), "TRAINOPS_CKPT_EVERY": "100"},
                "checkpoint": {"layout": "trainops", "keep": {"last": 3}},
            },
        },
    }
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (root / ".gitignore").write_text(".trainops/\n__pycache__/\n", encoding="utf-8")


def noop_run(work: Path, *, steps: int, repeat: int) -> dict[str, Any]:
    root, cache = work / "tiny-llm", work / "cache"
    root.mkdir()
    _project(root, steps)
    env = _env(cache)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    first = _timed([*TRAINOPS, "run"], cwd=root, env=env)
    runs, floors = [], []
    for _ in range(repeat):  # alternately, so a change in the machine's load hits both
        runs.append(_timed([*TRAINOPS, "run"], cwd=root, env=env))
        floors.append(_timed([*TRAINOPS, "validate"], cwd=root, env=env))
    out = subprocess.run([*TRAINOPS, "run", "-o", "json"], cwd=root, env=env, capture_output=True, text=True)
    statuses = {s["name"]: s["status"] for s in json.loads(out.stdout)["stages"]}
    return {
        "firstRunSeconds": round(first, 3),
        "noopRunSeconds": round(statistics.median(runs), 3),
        "noopRunCpuSeconds": round(statistics.median(CPU["run"][1:]), 3),
        "validateSeconds": round(statistics.median(floors), 3),
        "validateCpuSeconds": round(statistics.median(CPU["validate"]), 3),
        "ratio": round(statistics.median(runs) / statistics.median(floors), 2),
        "statuses": statuses,
        "target": "no-op run <= 2 s",
        "met": statistics.median(runs) <= 2.0 and statuses.get("train") == "cached",
        "metOnCpu": statistics.median(CPU["run"][1:]) <= 2.0,
    }


def _tree(root: Path, files: int) -> None:
    for i in range(files):
        path = root / "src" / f"pkg{i // 100:03d}" / f"mod{i % 100:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\nVALUE = {i}\n" + "x = 1\n" * (i % 50), encoding="utf-8")


def keys(work: Path, *, files: int, repeat: int) -> dict[str, Any]:
    from trainops.manifest import load_manifest
    from trainops.pipeline.keys import source_digest

    root, cache = work / "big", work / "keys-cache"
    root.mkdir()
    _tree(root, files)
    manifest_doc = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "big"},
        "spec": {"image": {"builder": "docker", "include": ["src/**"]}},
    }
    (root / "trainops.yaml").write_text(yaml.safe_dump(manifest_doc), encoding="utf-8")
    os.environ["TRAINOPS_CACHE_DIR"] = str(cache)
    manifest = load_manifest(root / "trainops.yaml")
    started = time.perf_counter()
    cold = source_digest(manifest=manifest)
    cold_s = time.perf_counter() - started
    warm_times, warm_cpu = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        warm = source_digest(manifest=manifest)
        warm_times.append(time.perf_counter() - started)
        warm_cpu.append(time.process_time() - cpu)
    assert warm.digest == cold.digest and len(warm.files) == files
    env = _env(cache)
    subprocess.run(["git", "init", "-q"], cwd=root, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    git_times = [_timed(["git", "status", "--porcelain"], cwd=root, env=env) for _ in range(repeat)]
    warm_s = statistics.median(warm_times)
    return {
        "files": files,
        "coldSeconds": round(cold_s, 3),
        "warmSeconds": round(warm_s, 3),
        "warmCpuSeconds": round(statistics.median(warm_cpu), 3),
        "gitStatusSeconds": round(statistics.median(git_times), 3),
        "gitStatusCpuSeconds": round(statistics.median(CPU["git"]), 3),
        "ratio": round(warm_s / statistics.median(git_times), 2),
        "target": "warm <= 1 s",
        "met": warm_s <= 1.0,
        "metOnCpu": statistics.median(warm_cpu) <= 1.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("-r", "--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="seconds: 2,000 files, 100 steps, 2 runs")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/run_cache.json")
    args = parser.parse_args()
    load = docresult.Load()
    if args.quick:
        args.files, args.steps, args.repeat = 2_000, 100, 2
    with tempfile.TemporaryDirectory(prefix="trainops-bench-run-") as tmp:
        work = Path(tmp)
        result = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
            "noopRun": noop_run(work, steps=args.steps, repeat=args.repeat),
            "keys": keys(work, files=args.files, repeat=args.repeat),
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    noop, key = result["noopRun"], result["keys"]
    print(f"{'measure':<34} {'trainops wall / CPU':>20} {'peer wall / CPU':>18}  target")
    print(
        f"{'no-op trainops run (all cached)':<34} {noop['noopRunSeconds']:>9.2f}s / {noop['noopRunCpuSeconds']:.2f}s "
        f"{noop['validateSeconds']:>8.2f}s / {noop['validateCpuSeconds']:.2f}s  ≤ 2 s: wall "
        f"{'✓' if noop['met'] else '✗'}, CPU {'✓' if noop['metOnCpu'] else '✗'}"
    )
    print(
        f"{'keys, ' + format(key['files'], ',') + ' files, warm':<34} {key['warmSeconds']:>9.2f}s / "
        f"{key['warmCpuSeconds']:.2f}s {key['gitStatusSeconds']:>8.2f}s / {key['gitStatusCpuSeconds']:.2f}s  "
        f"≤ 1 s: wall {'✓' if key['met'] else '✗'}, CPU {'✓' if key['metOnCpu'] else '✗'}"
    )
    print(
        f"(first run {noop['firstRunSeconds']:.2f} s; keys cold {key['coldSeconds']:.2f} s; "
        f"load {result['machine']['load']:.1f} on {result['machine']['cpus']} CPUs)"
    )
    if args.doc and not args.quick:
        mark = {True: "✓", False: "✗"}
        docresult.write(
            docresult.default_path("run_cache"),
            benchmark="run_cache",
            title=f"A trainops run with nothing changed, and stage keys of a big tree (median of {args.repeat})",
            load=load,
            columns=["benchmark", "trainops", "peer", "ratio", "target"],
            rows=[
                [
                    "no-op `trainops run` on tiny-llm, every stage cached",
                    f"{noop['noopRunSeconds']:.2f} s wall, {noop['noopRunCpuSeconds']:.2f} s CPU",
                    f"`trainops validate` {noop['validateSeconds']:.2f} s, {noop['validateCpuSeconds']:.2f} s CPU",
                    f"{noop['noopRunSeconds'] / noop['validateSeconds']:.2f} wall",
                    f"≤ 2 s: wall {mark[noop['met']]}, CPU {mark[noop['metOnCpu']]}",
                ],
                [
                    f"stage keys of {key['files']:,} files, digest cache warm",
                    f"{key['warmSeconds']:.2f} s wall, {key['warmCpuSeconds']:.2f} s CPU",
                    f"`git status` (warm index) {key['gitStatusSeconds']:.2f} s, "
                    f"{key['gitStatusCpuSeconds']:.2f} s CPU",
                    f"{key['warmSeconds'] / key['gitStatusSeconds']:.1f} wall",
                    f"≤ 1 s: wall {mark[key['met']]}, CPU {mark[key['metOnCpu']]}",
                ],
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
