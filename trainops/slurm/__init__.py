"""Slurm for real: sbatch/scontrol/scancel (here or over ssh), run records, and the job's supervisor.

- `client`: Slurm's commands, locally or on train.slurm.loginHost over ssh;
- `record`: which job a run became (`.trainops/runs/<pipeline>/<run>/run.json`);
- `jobs`: submit (held, committed to GitOps, released), status, logs, cancel.

The job's supervisor (`trainops train run --slurm`, what a bare-metal sbatch script runs)
is an executor beside the local one: trainops.pipeline.slurm.
"""
