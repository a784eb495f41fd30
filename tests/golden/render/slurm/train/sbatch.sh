#!/bin/bash
# Rendered by trainops from trainops.yaml (pipeline tiny-llm, run run-20250101-000000-abc123).
# Do not edit: change the manifest (or its spec.patches) and render again.
#SBATCH --job-name=tiny-llm-run-20250101-000000-abc123
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=32
#SBATCH --mem=262144M
#SBATCH --partition=gpu
#SBATCH --account=ml
#SBATCH --qos=high
#SBATCH --time=2-00:00:00
#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --signal=B:USR1@600
#SBATCH --open-mode=append
#SBATCH --output=tiny-llm-run-20250101-000000-abc123-%j.out
#
# Runs under pyxis/enroot: `trainops train run --slurm --image` supervises the job on the batch
# host and starts the training on every node with `srun --container-image=<the image by digest>`,
# the checkpoint directory mounted at train.checkpoint.dir and each dataset (pulled into the
# run directory first) read-only at its mountPath. The batch host needs trainops.
# As `train run --local` does on a laptop, it restores the newest checkpoint from the
# registry, pushes each complete checkpoint, kills a trainer that makes no progress for
# faultTolerance.hangTimeout and requeues the job (at most faultTolerance.maxRetry times),
# and on the time-limit signal (SIGUSR1, #SBATCH --signal) stops the training, pushes its last
# checkpoint and requeues. Submit with `trainops train submit` (or sbatch from the manifest's
# directory on the shared filesystem).
set -eo pipefail
cd "${SLURM_SUBMIT_DIR}"

run_dir="${SLURM_SUBMIT_DIR}"/.trainops/runs/tiny-llm/run-20250101-000000-abc123
exec trainops train run --slurm -f trainops.yaml --run-id run-20250101-000000-abc123 \
    --ckpt-dir "${run_dir}/checkpoints" --image harbor.example.com/llm/tiny-llm/image@sha256:abababababababababababababababababababababababababababababababab
