"""Slurm for real: sbatch/scontrol/scancel (here or over ssh), run records, nodes.

- `client`: Slurm's commands, locally or on train.slurm.loginHost over ssh;
- `record`: which job a run became (`.trainops/runs/<pipeline>/<run>/run.json`);
- `nodes`: the job's nodes.

Training on Slurm (submit, status, logs, cancel: trainops.train.slurm_jobs; the job's
supervisor, `trainops train run --slurm`: trainops.train.slurm_run) is the train room's.
"""
