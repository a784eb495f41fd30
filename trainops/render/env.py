"""The environment every training process gets, the same in pods and in the sbatch script.

- the trainops contract: TRAINOPS_PIPELINE, TRAINOPS_RUN_ID, TRAINOPS_IMAGE (ref@digest),
  TRAINOPS_IMAGE_DIGEST, TRAINOPS_CKPT_DIR, TRAINOPS_CKPT_REPOSITORY, TRAINOPS_GIT_COMMIT
  (when known), and the rendezvous: TRAINOPS_NNODES, TRAINOPS_NPROC_PER_NODE,
  TRAINOPS_RDZV_ENDPOINT;
- NCCL defaults (report problems, not chatter; a longer InfiniBand timeout), then
  torch.distributed hang detection: a failed collective tears the process group down
  (TORCH_NCCL_ASYNC_ERROR_HANDLING) and a watchdog stuck longer than
  faultTolerance.hangTimeout kills the process (TORCH_NCCL_ENABLE_MONITORING,
  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC), so a hung job fails and restarts from its checkpoint
  instead of holding its GPUs; train.nccl overrides and extends all of these;
- train.env, then train.secretEnv (in pods as secretKeyRef, never a value).

How the command starts: a `python …` or `torchrun …` command is launched with torchrun on
every node, with c10d rendezvous on the rank-0 node (`--nnodes`, `--nproc-per-node`,
`--rdzv-endpoint`, `--rdzv-id=<run id>`); torchrun's own options in the command come after
ours and win. Any other command (a shell script, another launcher) runs as written, once
per node, and finds the same values in the environment.
"""

from __future__ import annotations

import posixpath
import re

from trainops import podenv
from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.manifest.stages import TrainSpec

RDZV_PORT = 29500
CONTRACT = podenv.CONTRACT
# Set by the Volcano pytorch plugin or the training operator; two definitions would be ambiguous.
SCHEDULER_SET = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")

NCCL_DEFAULTS = (
    ("NCCL_DEBUG", "WARN"),
    ("NCCL_IB_TIMEOUT", "22"),
)
_PYTHON = re.compile(r"^python(3(\.[0-9]+)?)?$")
_SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|SECRET_KEY|PRIVATE_KEY|CREDENTIALS?)$", re.IGNORECASE
)


def nccl_env(train: TrainSpec) -> dict[str, str]:
    out = dict(NCCL_DEFAULTS)
    out["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    out["TORCH_NCCL_ENABLE_MONITORING"] = "1"
    out["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] = str(int(duration_seconds(train.fault_tolerance.hang_timeout)))
    out.update(train.nccl)
    return out


def nnodes(train: TrainSpec) -> str:
    if train.elastic is not None:
        return f"{train.elastic.min_nodes}:{train.elastic.max_nodes}"
    return str(train.nodes)


def nproc_per_node(train: TrainSpec) -> str:
    return str(train.gpus_per_node) if train.gpus_per_node else "auto"


def check_names(train: TrainSpec) -> None:
    """train.env and secretEnv must not redefine what trainops or the scheduler sets."""
    for source, names in (("train.env", train.env), ("train.secretEnv", train.secret_env)):
        for name in names:
            if name in CONTRACT:
                raise InputError(f"{source}.{name} is set by trainops", hint=f"remove it from {source}")
            if name in SCHEDULER_SET:
                raise InputError(
                    f"{source}.{name} is set by the scheduler for the rendezvous", hint=f"remove it from {source}"
                )
    for name, value in train.env.items():
        if name in train.nccl and train.nccl[name] != value:
            raise InputError(
                f"train.env.{name} and train.nccl.{name} differ", hint="set NCCL variables in train.nccl only"
            )
    for name in train.secret_env:
        if name in train.nccl:
            raise InputError(f"train.secretEnv.{name} is also in train.nccl", hint="keep it in one of them")


def secret_looking(train: TrainSpec) -> list[str]:
    """Warnings for train.env values whose names say they are secrets (they would be committed to git)."""
    return [
        f"train.env.{name} looks like a secret and would be written into the GitOps repository; "
        "move it to train.secretEnv (a Kubernetes Secret)"
        for name, value in train.env.items()
        if _SECRET_NAME.search(name) and value
    ]


def run_identity(
    *,
    pipeline: str,
    run_id: str,
    image: str,
    digest: str,
    ckpt_dir: str,
    repository: str,
    commit: str | None,
) -> dict[str, str]:
    """What every process of a run is told about it (the trainer and the checkpoint sidecar
    alike): the pod environment contract's identity part, in a fixed order."""
    env = {
        podenv.PIPELINE: pipeline,
        podenv.RUN_ID: run_id,
        podenv.IMAGE: image,
        podenv.IMAGE_DIGEST: digest,
        podenv.CKPT_DIR: ckpt_dir,
        podenv.CKPT_REPOSITORY: repository,
    }
    if commit:
        env[podenv.GIT_COMMIT] = commit
    return env


def process_env(
    *,
    pipeline: str,
    run_id: str,
    image: str,
    digest: str,
    ckpt_dir: str,
    repository: str,
    commit: str | None,
    train: TrainSpec,
    endpoint: str | None,
) -> list[tuple[str, str]]:
    """The literal environment of the training process, in a fixed order (secrets not included)."""
    env = run_identity(
        pipeline=pipeline,
        run_id=run_id,
        image=image,
        digest=digest,
        ckpt_dir=ckpt_dir,
        repository=repository,
        commit=commit,
    )
    env[podenv.NNODES] = nnodes(train)
    env[podenv.NPROC_PER_NODE] = nproc_per_node(train)
    if endpoint is not None:
        env[podenv.RDZV_ENDPOINT] = endpoint
    for name, value in nccl_env(train).items():
        env.setdefault(name, value)
    for name, value in train.env.items():
        env[name] = value
    return list(env.items())


def launch_argv(
    command: list[str], *, train: TrainSpec, endpoint: str, run_id: str, is_host: bool | None = None
) -> list[str]:
    """The command as each node runs it (see the module docstring)."""
    head = posixpath.basename(command[0])
    python = _PYTHON.match(head) and len(command) > 1 and (command[1] == "-m" or not command[1].startswith("-"))
    if not python and head != "torchrun":
        return list(command)
    rest = command[1:]
    restarts = train.elastic.max_restarts if train.elastic is not None else 0
    argv = [
        "torchrun",
        f"--nnodes={nnodes(train)}",
        f"--nproc-per-node={nproc_per_node(train)}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        f"--max-restarts={restarts}",
    ]
    if is_host is not None:
        argv.append(f"--rdzv-conf=is_host={'1' if is_host else '0'}")
    return argv + rest
