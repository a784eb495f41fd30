"""`trainops train run --slurm --image`: the supervisor of a pyxis job puts the container
options on its srun. pyxis/enroot cannot run here, so `srun` and `scontrol` are stand-ins on
PATH that record what they were asked; the registry (the dataset pulled before training) and
the supervisor are real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from trainops.train.slurm_run import TASK_RANKS
from trainops_testing.cli import Outcome, run

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny-llm"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example:5000/team/train@{DIGEST}"

# srun: its argv (NUL-separated) and the checkpoint directory the trainer is told, then success
FAKE_SRUN = r"""#!/bin/bash
printf '%s\0' "$@" > "$FAKE_DIR/srun-argv"
printf '%s' "$TRAINOPS_CKPT_DIR" > "$FAKE_DIR/srun-ckpt-dir"
"""
FAKE_SCONTROL = r"""#!/bin/bash
if [ "$1" = show ]; then echo node-a; fi
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/tiny-llm with an environment `pyxis` (slurm-local in a container, a dataset
    mounted), its dataset pushed, and the stand-ins on PATH inside a pretend job."""
    root = tmp_path / "tiny-llm"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".trainops", "checkpoints", "__pycache__"))
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    base = doc["environments"]["slurm-local"]
    train = {
        **base["train"],
        "workingDir": "/workspace",
        "checkpoint": {"dir": "/ckpt"},
        "datasets": [{"name": "corpus", "ref": "tiny-llm/datasets:v1", "mountPath": "/data"}],
        "slurm": {"runtime": "pyxis", "exclusive": False},
    }
    doc["environments"]["pyxis"] = {**base, "train": train}
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("tokens\n")
    pushed = run("push", str(corpus), "tiny-llm/datasets:v1", "-f", str(root / "trainops.yaml"), "--kind", "dataset")
    assert pushed.code == 0, pushed.stderr
    bin_dir, fake = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    fake.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DIR", str(fake))
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-a")
    monkeypatch.setenv("SLURMD_NODENAME", "node-a")
    return root


def _run_slurm(root: Path, image: str) -> Outcome:
    run_dir = root / ".trainops" / "runs" / "tiny-llm" / "r1"
    return run(
        "train", "run", "--slurm", "-f", str(root / "trainops.yaml"), "--env", "pyxis", "--run-id", "r1",
        "--ckpt-dir", str(run_dir / "checkpoints"), "--image", image, "-o", "json",
    )  # fmt: skip


def test_the_training_srun_gets_the_image_the_mounts_and_the_workdir(project: Path, tmp_path: Path) -> None:
    out = _run_slurm(project, IMAGE)
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["action"] == "completed"
    run_dir = (project / ".trainops" / "runs" / "tiny-llm" / "r1").resolve()
    argv = (tmp_path / "fake" / "srun-argv").read_text().split("\0")[:-1]
    assert argv[:3] == ["--nodes=1", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert argv[3:6] == [
        f"--container-image=registry.example:5000#team/train:{DIGEST}",  # enroot's name for it, by digest
        f"--container-mounts={run_dir}/checkpoints:/ckpt,{run_dir}:{run_dir},{run_dir}/datasets/corpus:/data:ro",
        "--container-workdir=/workspace",
    ]
    assert argv[6:10] == ["sh", "-c", TASK_RANKS, "trainops-task"] and argv[10:] == ["tiny-llm-train"]
    # what that shell gives the task: its place in the job, from srun's per-task variables
    slurm = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "2",
        "PATH": "/usr/bin:/bin",
    }
    shown = subprocess.run([*argv[6:10], "env"], env=slurm, capture_output=True, text=True, check=True).stdout
    ranks = dict(line.split("=", 1) for line in shown.splitlines() if "RANK" in line or "WORLD_SIZE" in line)
    assert ranks == {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "NODE_RANK": "2", "LOCAL_WORLD_SIZE": "1"}
    assert (run_dir / "datasets" / "corpus" / "train.txt").read_text() == "tokens\n"  # pulled before training
    assert (tmp_path / "fake" / "srun-ckpt-dir").read_text() == "/ckpt"  # where the trainer sees them


def test_an_image_not_pinned_by_digest_is_refused_before_anything_runs(project: Path, tmp_path: Path) -> None:
    out = _run_slurm(project, "registry.example:5000/team/train:v1")
    assert out.code == 3, out.stderr  # bad input
    assert "--image 'registry.example:5000/team/train:v1' is a mutable tag" in out.last_error_line
    assert not (tmp_path / "fake" / "srun-argv").exists()


def test_a_secret_missing_from_the_job_stops_it_before_anything_runs(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc["environments"]["pyxis"]["train"]["secretEnv"] = {"WANDB_API_KEY": {"secret": "wandb", "key": "api-key"}}
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    out = _run_slurm(project, IMAGE)
    assert out.code == 3, out.stderr
    assert "train.secretEnv WANDB_API_KEY is not set in the job's environment" in out.last_error_line
    assert not (tmp_path / "fake" / "srun-argv").exists()
    assert not (project / ".trainops" / "runs" / "tiny-llm" / "r1" / "datasets").exists()
