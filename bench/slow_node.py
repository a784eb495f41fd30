"""A slow node on real Slurm, side by side: leaving it against letting the run go on slowly.

tiny-llm trains the same steps on two of a three-node Slurm cluster
(trainops_testing/slurm_cluster.py: several slurmd on this machine), one task per node,
three times:

1. **undisturbed**: no drill — its wall clock T0, and the slow-node incidents trainops
   raised (false positives: must be none);
2. **left slow**: rank 1 throttled 2x for the whole run (`trainops drill slow-node`, a stop/
   continue duty cycle of one half), train.faults.slowNode.moveCost 1 h, so trainops only
   names it — T_slow, what tolerating it costs;
3. **acted**: the same throttle, moveCost `--move-cost`: trainops tolerates the straggler
   until it has cost that much, then requeues the job with its node excluded; the job
   starts again on the other two nodes from the newest checkpoint — T_acted, the time to
   detection (the drill's start to the incident's evidence) and trainops' ETTR of the run.

Slurm's own requeue delay is skipped (the job is let start at once, as an operator's
`scontrol update StartTime=now` would): what is measured is trainops' share.

    python bench/slow_node.py             # 60,000 steps each, moveCost 30 s
    python bench/slow_node.py --quick     # the undisturbed and the acted run, 12,000 steps, moveCost 4 s
    python bench/slow_node.py --doc       # also write docs/operations/results/slow_node.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness import docresult, tinyllm

from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster

DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


@dataclass
class Run:
    name: str
    wall_s: float
    incidents: list[dict[str, object]]
    ettr: float | None
    detection_s: float | None = None


def _project(base: Path, *, steps: int, move_cost: str) -> Path:
    return tinyllm.project(
        base,
        {
            "nodes": 2,
            "env": {"TRAINOPS_CKPT_EVERY": "500", "TRAINOPS_MAX_STEPS": str(steps), "TINY_LLM_PROGRESS_EVERY": "20"},
            "faultTolerance": {"hangTimeout": "30s", "maxRetry": 3},
            "faults": {"killAfter": "5s", "slowNode": {"moveCost": move_cost}},
        },
    )


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _start_again(cluster: SlurmCluster, job: str, restarts: int) -> None:
    """A requeued job pending with its old steps gone: let it start now (Slurm's requeue delay skipped)."""
    info = cluster.job(job)
    if (
        info.get("JobState") == "PENDING"
        and int(info.get("Restarts", 0)) >= restarts
        and not cluster.job_processes(job)
    ):
        cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now", check=False)


def one(cluster: SlurmCluster, base: Path, name: str, *, steps: int, move_cost: str, throttle: bool) -> Run:
    root = _project(base / name, steps=steps, move_cost=move_cost)
    env = {**os.environ, **cluster.env, "TRAINOPS_VENV": sys.prefix}
    conf = ("-f", str(root / "trainops.yaml"), "--env", "bench")
    data = json.loads(tinyllm.trainops("train", "submit", *conf, "-o", "json", env=env))
    job, run_id = str(data["jobId"]), str(data["runId"])
    wait_for(lambda: cluster.job(job).get("JobState") in ("RUNNING", *DONE), timeout=120, what=f"job {job} running")
    started = time.monotonic()
    drill = None
    drilled_at: float | None = None
    log = root / "drill.log"
    try:
        if throttle:
            argv = ["drill", "slow-node", run_id, *conf, "--rank", "1", "--duty", "0.5", "--seconds", "3600"]

            def throttling() -> bool:
                nonlocal drill, drilled_at
                drilled_at = time.time()
                drill = subprocess.Popen(
                    [str(Path(sys.executable).with_name("trainops")), *argv],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=log.open("a"),
                )
                try:
                    drill.wait(timeout=1.0)  # a drill that found no rank-1 process yet has exited
                except subprocess.TimeoutExpired:
                    return True
                return False

            wait_for(throttling, timeout=120, what="the slow-node drill on rank 1", interval=0.5)
        while cluster.job(job).get("JobState") not in DONE:
            _start_again(cluster, job, 1)
            time.sleep(0.5)
        wall = time.monotonic() - started
    finally:
        if drill is not None and drill.poll() is None:
            drill.terminate()
            drill.wait(timeout=30)
    info = cluster.job(job)
    if info.get("JobState") != "COMPLETED":
        raise SystemExit(f"bench/slow_node.py: {name}: job {job} ended {info.get('JobState')}: {info.get('Comment')}")
    incidents = json.loads(tinyllm.trainops("incidents", "ls", run_id, *conf[:2], "-o", "json", env=env))
    slow = [i for i in incidents["incidents"] if i["fault"] == "slow-node"]
    if throttle and not slow:
        said = log.read_text()[-600:]
        print(f"bench/slow_node.py: {name}: no slow-node incident; the drill said: {said}", file=sys.stderr)
    status = json.loads(tinyllm.trainops("train", "status", run_id, *conf, "-o", "json", env=env))
    ettr = (status.get("ettr") or {}).get("ettr")
    detection = None
    if slow and drilled_at is not None:
        detection = _epoch(str(slow[0]["detected"])) - drilled_at
    return Run(name, wall, slow, ettr, detection)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the undisturbed and the acted run, short (CI)")
    parser.add_argument("--steps", type=int, default=None, help="steps of each run (default 60,000; quick 12,000)")
    parser.add_argument("--move-cost", default=None, help="train.faults.slowNode.moveCost of the acted run")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/slow_node.json")
    args = parser.parse_args()
    steps = args.steps or (12000 if args.quick else 60000)
    move_cost = args.move_cost or ("4s" if args.quick else "30s")
    load = docresult.Load()
    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="trainops-slow-node-") as tmp,
        SlurmCluster(Path(tmp) / "slurm", nodes=3) as cluster,
    ):
        runs.append(one(cluster, Path(tmp), "undisturbed", steps=steps, move_cost=move_cost, throttle=False))
        if not args.quick:
            runs.append(one(cluster, Path(tmp), "left slow", steps=steps, move_cost="1h", throttle=True))
        runs.append(one(cluster, Path(tmp), "acted", steps=steps, move_cost=move_cost, throttle=True))
    load.end = os.getloadavg()[0]
    base = runs[0].wall_s
    rows = []
    for run in runs:
        detection = f"{run.detection_s:.1f} s" if run.detection_s is not None else "—"
        actions = ", ".join(str(i["action"]) for i in run.incidents) or "none"
        ettr = f"{run.ettr:.3f}" if run.ettr is not None else "—"
        rows.append([run.name, f"{run.wall_s:.1f} s", f"{run.wall_s / base:.2f}", detection, actions, ettr])
        print(f"{run.name:<12} {run.wall_s:7.1f} s  x{run.wall_s / base:.2f}  detection {detection:>8}  {actions}")
    print(load.text())
    if args.doc:
        docresult.write(
            docresult.default_path("slow_node"),
            benchmark="slow_node",
            title=f"One rank 2x slower on real Slurm: {steps} steps on 2 of 3 nodes, moveCost {move_cost}",
            load=load,
            columns=["run", "wall clock", "× undisturbed", "detection", "slow-node actions", "ETTR (trainops)"],
            rows=rows,
        )
    acted = runs[-1]
    ok = not runs[0].incidents and [str(i["action"]) for i in acted.incidents] == ["requeue"]
    if not ok:
        print("bench/slow_node.py: a false positive, or the slow rank was not left", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
