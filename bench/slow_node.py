"""A slow node on real Slurm, side by side: leaving it against letting the run go on slowly.

tiny-llm trains the same steps in three runs at once on one seven-node Slurm cluster
(trainops_testing/slurm_cluster.py: several slurmd on this machine), each run its own
project and job on two nodes, one task per node — at the same time, so that all three see
the same machine load (one after the other, a shared machine's load drifts between them):

1. **undisturbed**: no drill — its wall clock T0, and the slow-node incidents trainops
   raised (false positives: must be none);
2. **left slow**: rank 1 throttled 2x for the whole run (`trainops drill slow-node`, a stop/
   continue duty cycle of one half), train.faults.slowNode.moveCost 1 h, so trainops only
   tolerates it — T_slow, what tolerating it costs;
3. **acted**: the same throttle, moveCost `--move-cost`: trainops tolerates the straggler
   until it has cost that much, then requeues the job with its node excluded; the job
   starts again on its other node and the seventh, spare one from the newest checkpoint —
   T_acted, the time to detection (the drill's start to the incident's evidence) and
   trainops' ETTR of the run.

A run's wall clock is from its job running to its job ended (as seen every half second).
Slurm's own requeue delay is skipped (the job is let start at once, as an operator's
`scontrol update StartTime=now` would): what is measured is trainops' share.

    python bench/slow_node.py             # 60,000 steps each, moveCost 30 s
    python bench/slow_node.py --quick     # the undisturbed and the acted run (5 nodes), 4,000 steps, moveCost 4 s
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

from trainops_testing.slurm_cluster import SlurmCluster

NODES_PER_RUN = 2


@dataclass
class Run:
    name: str
    wall_s: float
    incidents: list[dict[str, object]]
    ettr: float | None
    detection_s: float | None = None


@dataclass
class Arm:
    """One run of the side by side: its project, job, and the drill throttling its rank 1."""

    name: str
    root: Path
    throttle: bool
    job: str = ""
    run_id: str = ""
    started: float | None = None  # monotonic: its job seen running
    ended: float | None = None  # …seen ended
    drill: subprocess.Popen[bytes] | None = None
    drilled_at: float | None = None  # Unix time the last drill started (the one that throttles)

    @property
    def conf(self) -> tuple[str, ...]:
        return ("-f", str(self.root / "trainops.yaml"), "--env", "bench")


def _project(base: Path, *, steps: int, move_cost: str) -> Path:
    return tinyllm.project(
        base,
        {
            "nodes": NODES_PER_RUN,
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


def _throttle(cluster: SlurmCluster, arm: Arm, env: dict[str, str]) -> None:
    """Keep the slow-node drill on rank 1 going: start it again when it exited (one that found no
    rank-1 process yet exits at once; under load it takes a while to see that), until the job
    was requeued — then it runs without the slow node, not throttled again."""
    if arm.drill is not None and arm.drill.poll() is None:
        return
    if arm.drill is not None and int(cluster.job(arm.job).get("Restarts", 0)) > 0:
        return
    argv = ["drill", "slow-node", arm.run_id, *arm.conf, "--rank", "1", "--duty", "0.5", "--seconds", "3600"]
    with (arm.root / "drill.log").open("a") as log:
        arm.drilled_at = time.time()
        arm.drill = subprocess.Popen(
            [str(Path(sys.executable).with_name("trainops")), *argv], env=env, stdout=subprocess.DEVNULL, stderr=log
        )


def side_by_side(cluster: SlurmCluster, arms: list[Arm], env: dict[str, str], *, timeout: float) -> None:
    """Submit every arm's job at once, throttle those that throttle, and follow them all until
    each has ended (a requeued one let start again at once)."""
    for arm in arms:
        arm.job, arm.run_id = tinyllm.submit(arm.root, env)
    deadline = time.monotonic() + timeout
    try:
        while any(arm.ended is None for arm in arms):
            if time.monotonic() > deadline:
                raise SystemExit(f"bench/slow_node.py: the runs did not all end in {timeout:.0f} s")
            for arm in arms:
                if arm.ended is not None:
                    continue
                state = cluster.job(arm.job).get("JobState")
                now = time.monotonic()
                if arm.started is None and state in ("RUNNING", *tinyllm.DONE):
                    arm.started = now
                if state in tinyllm.DONE:
                    arm.ended = now
                    continue
                if arm.started is not None and arm.throttle:
                    _throttle(cluster, arm, env)
                _start_again(cluster, arm.job, 1)
            time.sleep(0.5)
    finally:
        for arm in arms:
            if arm.drill is not None and arm.drill.poll() is None:
                arm.drill.terminate()
                arm.drill.wait(timeout=30)


def result(cluster: SlurmCluster, arm: Arm, env: dict[str, str]) -> Run:
    """What one arm measured: its wall clock, slow-node incidents, ETTR, time to detection."""
    info = cluster.job(arm.job)
    if info.get("JobState") != "COMPLETED":
        raise SystemExit(
            f"bench/slow_node.py: {arm.name}: job {arm.job} ended {info.get('JobState')}: {info.get('Comment')}"
        )
    assert arm.started is not None and arm.ended is not None
    incidents = json.loads(tinyllm.trainops("incidents", "ls", arm.run_id, *arm.conf[:2], "-o", "json", env=env))
    slow = [i for i in incidents["incidents"] if i["fault"] == "slow-node"]
    if arm.throttle and not slow:
        said = (arm.root / "drill.log").read_text()[-600:] if (arm.root / "drill.log").exists() else ""
        print(f"bench/slow_node.py: {arm.name}: no slow-node incident; the drill said: {said}", file=sys.stderr)
    status = json.loads(tinyllm.trainops("train", "status", arm.run_id, *arm.conf, "-o", "json", env=env))
    ettr = (status.get("ettr") or {}).get("ettr")
    detection = None
    if slow and arm.drilled_at is not None:
        detection = _epoch(str(slow[0]["detected"])) - arm.drilled_at
    return Run(arm.name, arm.ended - arm.started, slow, ettr, detection)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the undisturbed and the acted run, short (CI)")
    parser.add_argument("--steps", type=int, default=None, help="steps of each run (default 60,000; quick 4,000)")
    parser.add_argument("--move-cost", default=None, help="train.faults.slowNode.moveCost of the acted run")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/slow_node.json")
    args = parser.parse_args()
    steps = args.steps or (4000 if args.quick else 60000)
    move_cost = args.move_cost or ("4s" if args.quick else "30s")
    load = docresult.Load()
    # (name, moveCost, throttled): each its own project and job, all at once
    plan = [("undisturbed", move_cost, False)]
    if not args.quick:
        plan.append(("left slow", "1h", True))
    plan.append(("acted", move_cost, True))
    nodes = NODES_PER_RUN * len(plan) + 1  # and a spare for the acted run once it leaves its slow node
    with (
        tempfile.TemporaryDirectory(prefix="trainops-slow-node-") as tmp,
        SlurmCluster(Path(tmp) / "slurm", nodes=nodes) as cluster,
    ):
        env = {**os.environ, **cluster.env, "TRAINOPS_VENV": sys.prefix}
        arms = [
            Arm(name, _project(Path(tmp) / name, steps=steps, move_cost=cost), throttled)
            for name, cost, throttled in plan
        ]
        side_by_side(cluster, arms, env, timeout=600 + steps / 10)
        runs = [result(cluster, arm, env) for arm in arms]
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
            title=f"One rank 2x slower on real Slurm, side by side: {steps} steps, each run on 2 of {nodes} nodes, "
            f"moveCost {move_cost}",
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
