"""A pyxis (container) sbatch script: submitted to the real scheduler, committed executable.

The node here has no pyxis/enroot, so the job itself cannot run its image; what is checked
is the submission: sbatch accepts the script, the job id is reported and recorded in the
GitOps commit, and the committed script is executable, valid bash, and hands the pinned image
to `trainops train run --slurm --image` (tests/pipeline/test_slurm_container.py follows it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.cli.test_train_cli import IMAGE, _git, project
from trainops_testing.cli import run
from trainops_testing.slurm_cluster import SlurmCluster

__all__ = ["project"]  # the fixture, shared with the CLI tests


def test_submit_of_a_slurm_job_commits_an_executable_script(
    project: Path, git_remote: Path, slurm: SlurmCluster
) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    doc["spec"]["train"]["scheduler"] = "slurm"
    doc["spec"]["train"]["slurm"] = {"partition": "debug", "time": "04:00:00", "exclusive": False}
    doc["spec"]["train"]["resources"] = {}
    doc["spec"]["train"]["gpusPerNode"] = 0
    doc["spec"]["train"]["nodes"] = 1
    doc["spec"]["train"].pop("topology")
    doc["spec"]["patches"] = []
    doc["spec"]["tenants"] = []
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    out = run("train", "submit", "--image", IMAGE, "--run-id", "s1", "-o", "json")
    assert out.code == 0, out.stderr
    job = json.loads(out.stdout)["jobId"]
    slurm.run("scancel", job, check=True)  # it would fail here: no pyxis
    assert slurm.job(job)["JobName"] == "tiny-llm-s1"
    assert f"Trainops-Slurm-Job: {job}" in _git(git_remote, "log", "-1", "--format=%B", "main")
    listing = _git(git_remote, "ls-tree", "-r", "main").splitlines()
    (entry,) = [line for line in listing if line.endswith("clusters/dev/train/sbatch.sh")]
    assert entry.startswith("100755 blob")
    script = _git(git_remote, "show", "main:clusters/dev/train/sbatch.sh")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert "#SBATCH --partition=debug" in script
    assert script.rstrip().splitlines()[-1].endswith(f" --image {IMAGE}")
