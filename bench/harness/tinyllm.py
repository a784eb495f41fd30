"""tiny-llm on the test Slurm cluster, for the benchmarks that train it there (bench/ettr.py,
bench/slow_node.py): a copy of examples/tiny-llm with an environment `bench` — slurm-local
with the benchmark's train fields over it — and the trainops console script beside this
interpreter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


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
