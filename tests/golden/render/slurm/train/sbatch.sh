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
# Runs under pyxis/enroot, one task per node. enroot names an image REGISTRY#REPOSITORY and
# has no @digest syntax: the digest stands where a tag would, so the manifest is fetched by
# digest. Submit with `sbatch` from the directory the run's files should live under.
set -euo pipefail

image='harbor.example.com#llm/tiny-llm/image:sha256:abababababababababababababababababababababababababababababababab'
agent_image='harbor.example.com#llm/tiny-llm/image:sha256:abababababababababababababababababababababababababababababababab'
ckpt_dir=/ckpt
run_dir="${SLURM_SUBMIT_DIR}"/.trainops/runs/tiny-llm/run-20250101-000000-abc123
ckpt_host_dir="${run_dir}/checkpoints"

# The environment of every training process: the same contract and NCCL settings as the pods.
export TRAINOPS_PIPELINE=tiny-llm
export TRAINOPS_RUN_ID=run-20250101-000000-abc123
export TRAINOPS_IMAGE=harbor.example.com/llm/tiny-llm/image@sha256:abababababababababababababababababababababababababababababababab
export TRAINOPS_IMAGE_DIGEST=sha256:abababababababababababababababababababababababababababababababab
export TRAINOPS_CKPT_DIR=/ckpt
export TRAINOPS_CKPT_REPOSITORY=oci://harbor.example.com/llm/tiny-llm/checkpoints
export TRAINOPS_GIT_COMMIT=0123456789abcdef0123456789abcdef01234567
export TRAINOPS_NNODES=2
export TRAINOPS_NPROC_PER_NODE=8
export NCCL_DEBUG=WARN
export NCCL_IB_TIMEOUT=22
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
export TORCH_NCCL_ENABLE_MONITORING=1
export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=600
export NCCL_IB_HCA=mlx5
export NCCL_SOCKET_IFNAME=eth0
export TRAINOPS_CKPT_EVERY=100
export TRAINOPS_MAX_STEPS=1000

# train.secretEnv: Kubernetes Secrets on a cluster; here they come from the environment sbatch ran in.
: "${WANDB_API_KEY:?train.secretEnv.WANDB_API_KEY is not set: export it before running sbatch}"
export WANDB_API_KEY

# the first node hosts the rendezvous (sed reads the whole list: `head` would leave scontrol a
# SIGPIPE, which pipefail turns into an exit on a large allocation)
head_node="$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | sed -n 1p)"
export TRAINOPS_RDZV_ENDPOINT="${head_node}:29500"
mkdir -p -- "${ckpt_host_dir}"
agent_mounts="${ckpt_host_dir}:${ckpt_dir}"
train_mounts="${ckpt_host_dir}:${ckpt_dir}"
mkdir -p -- "${run_dir}/"datasets/corpus
agent_mounts="${agent_mounts},${run_dir}/"datasets/corpus":"/data
train_mounts="${train_mounts},${run_dir}/"datasets/corpus":"/data":ro"
on_head=(--nodes=1 --ntasks=1 --nodelist="${head_node}" --gres=none)
agent=(--container-image="${agent_image}" --container-mounts="${agent_mounts}")

# Restore: the newest checkpoint of the repository, unless the run directory holds one as new.
srun "${on_head[@]}" "${agent[@]}" trainops ckpt pull --latest oci://harbor.example.com/llm/tiny-llm/checkpoints /ckpt
srun "${on_head[@]}" "${agent[@]}" trainops pull oci://harbor.example.com/llm/tiny-llm/datasets:corpus-v1 /data

# The checkpoint watcher pushes each complete checkpoint while training runs.
srun --overlap "${on_head[@]}" "${agent[@]}" trainops ckpt watch /ckpt --repository oci://harbor.example.com/llm/tiny-llm/checkpoints --run-id run-20250101-000000-abc123 --layout trainops --keep-last 5 --keep-best 1 --metric val_loss --mode min --until-signal &
watcher_pid=$!

# Slurm sends SIGUSR1 checkpoint.gracePeriod before the time limit (#SBATCH --signal): pass
# SIGTERM to the training so it can save, and requeue afterwards. A plain SIGTERM (scancel,
# preemption) is passed on the same way, without a requeue.
time_limit=0
train_pid=
stop_training() {
    if [ -n "${train_pid}" ]; then kill -TERM "${train_pid}" 2>/dev/null || true; fi
}
trap 'time_limit=1; stop_training' USR1
trap 'stop_training' TERM

srun --overlap --nodes=2 --ntasks-per-node=1 --container-image="${image}" --container-mounts="${train_mounts}" \
    torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint="${TRAINOPS_RDZV_ENDPOINT}" --rdzv-id=run-20250101-000000-abc123 --max-restarts=0 -m tiny_llm.train &
train_pid=$!

status=0
while :; do
    if wait "${train_pid}"; then status=0; else status=$?; fi
    # a trapped signal interrupts wait; wait again until the training step has exited
    if ! kill -0 "${train_pid}" 2>/dev/null; then break; fi
done
trap - TERM USR1

# Training is over: stop the watcher (SIGTERM), then let it push what is left.
kill -TERM "${watcher_pid}" 2>/dev/null || true
if ! wait "${watcher_pid}"; then
    echo "trainops: the checkpoint watcher exited with an error; the last checkpoint may not be pushed" >&2
fi

# The time limit came (a script that saves on SIGTERM may then exit 0, unfinished): go back in
# the queue; the next start resumes from the newest checkpoint.
if [ "${time_limit}" = 1 ]; then
    echo "trainops: stopped before the time limit (exit ${status}); requeueing" >&2
    scontrol requeue "${SLURM_JOB_ID}"
fi
exit "${status}"
