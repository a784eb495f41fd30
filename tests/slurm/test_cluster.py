"""The fixture itself: a batch job runs, requeues and is cancelled on the real scheduler."""

from __future__ import annotations

from pathlib import Path

from trainops_testing.slurm_cluster import SlurmCluster


def test_sbatch_runs_a_job(slurm: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\necho hello from $SLURM_JOB_ID on $(hostname)\n")
    out = slurm.run("sbatch", "--parsable", f"--chdir={tmp_path}", "--output=out-%j.txt", str(script), check=True)
    job_id = out.stdout.strip().split(";")[0]
    info = slurm.wait_job(job_id, ("COMPLETED", "FAILED"), timeout=60)
    assert info["JobState"] == "COMPLETED", info
    assert (tmp_path / f"out-{job_id}.txt").read_text().strip() == f"hello from {job_id} on {slurm.host}"


def test_several_nodes_on_one_machine(slurm_nodes: SlurmCluster) -> None:
    """Each node is its own slurmd; a job lands on the node asked for and avoids an excluded one."""
    out = slurm_nodes.run("srun", f"--nodelist={slurm_nodes.nodes[1]}", "printenv", "SLURMD_NODENAME", check=True)
    assert out.stdout.strip() == slurm_nodes.nodes[1]
    excluded = ",".join(slurm_nodes.nodes[:2])
    out = slurm_nodes.run("srun", f"--exclude={excluded}", "printenv", "SLURMD_NODENAME", check=True)
    assert out.stdout.strip() == slurm_nodes.nodes[2]
