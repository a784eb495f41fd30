"""tiny-llm on the test Slurm cluster, for the benchmarks that train it there (bench/ettr.py,
bench/slow_node.py): a copy of examples/tiny-llm with an environment `bench` — slurm-local
with the benchmark's train fields over it —, the trainops console script beside this
interpreter, and its jobs submitted, waited for and timed (several at once, one per project,
for runs side by side under the same load)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.slurm_cluster import SlurmCluster

ROOT = Path(__file__).resolve().parents[2]
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def project(base: Path, train: dict[str, Any]) -> Path:
    """examples/tiny-llm copied to base/tiny-llm, with environment `bench`: slurm-local's train
    section with `train`'s fields over it."""
    root = base / "tiny-llm"
    shutil.copytree(ROOT / "examples" / "tiny-llm", root, ignore=shutil.ignore_patterns(".trainops", "__pycache__"))
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    env = doc["environments"]["slurm-local"]
    doc["environments"]["bench"] = {**env, "train": {**env["train"], **train}}
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def trainops(*args: str, env: dict[str, str]) -> str:
    """`trainops ARGS`' stdout; RuntimeError with its stderr's tail when it fails."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("trainops")), *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"trainops {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def submit(root: Path, env: dict[str, str]) -> tuple[str, str]:
    """`trainops train submit` of the project at root (environment `bench`): its job and run id."""
    data = json.loads(trainops("train", "submit", "-f", str(root / "trainops.yaml"), "--env", "bench", "-o", "json",
                               env=env))  # fmt: skip
    return str(data["jobId"]), str(data["runId"])


def wait(cluster: SlurmCluster, job: str, *, timeout: float) -> None:
    """Until the job has ended (any of DONE); RuntimeError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while cluster.job(job).get("JobState") not in DONE:
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job} did not finish in {timeout:.0f} s")
        time.sleep(1)


def wall(cluster: SlurmCluster, job: str) -> float:
    """A completed job's wall clock by Slurm (StartTime to EndTime; its last start, if requeued)."""
    info = cluster.job(job)
    if info.get("JobState") != "COMPLETED":
        raise RuntimeError(f"job {job} ended {info.get('JobState')}: {info.get('Comment')}")
    # Slurm's times are local and to the second, both in the same zone
    return (datetime.fromisoformat(info["EndTime"]) - datetime.fromisoformat(info["StartTime"])).total_seconds()
