"""The Slurm executor, `trainops train run --slurm`: the job's supervisor on its batch host.

Every sbatch script trainops renders ends in it. It is `train run --local`
(trainops.train.local: restore the newest checkpoint, run the command, push every
complete checkpoint, pass signals on) with the command started on every node by `srun` —
under pyxis/enroot with `--image` (the script's pinned image): `srun --container-image=…
--container-mounts=…` with the checkpoint directory at train.checkpoint.dir, the run
directory at its own path (the heartbeat file) and each dataset with a mountPath, pulled
into the run directory first, read-only at its mountPath — and three things Slurm adds:

- **time limit**: sbatch's `--signal=B:USR1@grace` reaches this process (the batch shell
  exec'd it); the trainer gets SIGTERM, saves, the last checkpoint is pushed, then the job
  is put back in the queue (`scontrol requeue`) and its next start resumes from the registry;
- **faults** (trainops.faults, through trainops.train.faulted): the trainer's output,
  the node-health sources, its checkpoints and heartbeat (a file the trainer may touch,
  $TRAINOPS_HEARTBEAT_FILE; silence for faultTolerance.hangTimeout is a hang) are watched;
  a fault is diagnosed and acted on — restarted in place inside this allocation, the node
  excluded and the job requeued, the node drained (`scontrol update NodeName=… State=DRAIN
  Reason=…`) then the job requeued without it, or the run failed with the diagnosis in one
  line — and each is an incident in the registry; after faultTolerance.maxRetry restarts
  the run fails;
- **a note on the job**: each decision is written to the job's Comment (`scontrol show job`,
  `trainops train status`).

A SIGTERM from Slurm (scancel, preemption, a node set down) is passed on the same way and
the job ends; Slurm itself requeues a `--requeue` job whose node failed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from trainops import podenv
from trainops.errors import CommandFailedError, InputError, UsageError
from trainops.faults.hang import HEARTBEAT_ENV, ProgressClock
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.stages import TrainSpec
from trainops.registry.context import Registries
from trainops.registry.reference import parse_reference
from trainops.render.env import RDZV_PORT, launch_argv
from trainops.render.image import pin_image
from trainops.serialize import FLATTEN
from trainops.slurm.client import SlurmHost, control
from trainops.slurm.nodes import allocation_nodes, check_node, drain_node, requeue_excluding
from trainops.train.local import LocalRunOptions, LocalRunResult

if TYPE_CHECKING:
    from trainops.faults.session import Decision
    from trainops.registry.reference import Reference
    from trainops.render.image import PinnedImage
    from trainops.train.faulted import SupervisedRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlurmRunResult:
    job_id: str
    restart: int  # SLURM_RESTART_COUNT: how many times the job was started before this one
    action: str  # "completed" | "requeued" | "stopped"
    reason: str
    run: LocalRunResult = field(metadata=FLATTEN)  # in JSON: the run's fields beside the job's


@dataclass(frozen=True)
class Container:
    """What pyxis runs the training in: the pinned image and the mounts (HOST:PATH[:ro])."""

    image: PinnedImage
    mounts: list[str]
    workdir: str | None = None

    def srun_options(self) -> list[str]:
        image = self.image.enroot if self.image.pullable else self.image.ref
        out = [f"--container-image={image}", f"--container-mounts={','.join(self.mounts)}"]
        return out + ([f"--container-workdir={self.workdir}"] if self.workdir else [])


# A command torchrun does not launch reads its place in the job from torch.distributed's
# names, as on Kubernetes; srun sets Slurm's per task, so each task's shell turns them into
# those (Lightning's and Accelerate's SLURM environments read the same variables).
TASK_RANKS = (
    'export RANK="$SLURM_PROCID" WORLD_SIZE="$SLURM_NTASKS" LOCAL_RANK="$SLURM_LOCALID" '
    'NODE_RANK="$SLURM_NODEID" LOCAL_WORLD_SIZE=1; exec "$@"'
)


def srun_argv(train: TrainSpec, *, run_id: str, head: str, container: Container | None = None) -> list[str]:
    """train.command on every node of the allocation, one task per node (torchrun for python;
    any other command with RANK, WORLD_SIZE, LOCAL_RANK and NODE_RANK of its task), in
    `container` when there is one."""

    command = launch_argv(list(train.command), train=train, endpoint=f"{head}:{RDZV_PORT}", run_id=run_id)
    if command[0] != "torchrun":
        command = ["sh", "-c", TASK_RANKS, "trainops-task", *command]
    inside = container.srun_options() if container is not None else []
    return ["srun", f"--nodes={train.nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", *inside, *command]


def container_for(manifest: Manifest, *, image: str, run_dir: Path, ckpt_dir: Path, insecure: bool) -> Container:
    """The container of a pyxis job: `image` (pinned by the sbatch script), the checkpoint
    and run directories, and each dataset with a mountPath, pulled into the run directory."""
    from trainops.registry.pulling import pull  # lazy: loads sqlite3

    train = manifest.require_train()
    pinned = pin_image(image, field="--image")
    mounts = [f"{ckpt_dir}:{train.checkpoint.dir}", f"{run_dir}:{run_dir}"]
    datasets = [data for data in train.datasets if data.mount_path is not None]
    if datasets:
        with Registries.for_manifest(manifest, insecure=insecure) as registries:
            for data in datasets:
                where = run_dir / "datasets" / data.name
                pull(registries, ref=registries.ref(data.ref), dest=where)
                mounts.append(f"{where}:{data.mount_path}:ro")
    return Container(pinned, mounts, train.working_dir)


def _image_ref(image: PinnedImage) -> Reference:
    """The pinned image as the lineage of the checkpoints records it."""

    return parse_reference(image.ref if not image.pullable else f"oci://{image.ref}")


def _note(job_id: str, text: str) -> None:
    """The decision, on the job itself (Comment) and on stderr (the job's output)."""
    log.warning("trainops: job %s: %s", job_id, text)
    try:
        control(SlurmHost(), "scontrol", "update", f"JobId={job_id}", f"Comment=trainops: {text}"[:250])
    except Exception as err:  # a note is not worth failing the job for
        log.warning("could not set the comment of job %s: %s", job_id, err)


def run_slurm(
    manifest: Manifest,
    *,
    run_id: str,
    ckpt_dir: Path,
    image: str | None = None,
    interval: float = 2.0,
    insecure: bool = False,
    on_push: Any = None,
    command_stdout: IO[Any] | None = None,
) -> SlurmRunResult:
    """Supervise this allocation's training (module docstring), in the container of `image`
    (pyxis) when one is named; restart, requeue, drain or fail."""
    from trainops.train.faulted import Watch, run_supervised  # lazy: loads ssl, socketserver

    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise UsageError("train run --slurm runs inside a Slurm job (SLURM_JOB_ID is not set)", hint="use --local here")
    train = manifest.require_train()
    _require_secrets(train)
    ckpt_dir = ckpt_dir.resolve()
    run_dir = ckpt_dir.parent
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    heartbeat = run_dir / "heartbeat"
    container = None
    overrides = {HEARTBEAT_ENV: str(heartbeat)}
    if image is not None:
        container = container_for(manifest, image=image, run_dir=run_dir, ckpt_dir=ckpt_dir, insecure=insecure)
        overrides[podenv.CKPT_DIR] = train.checkpoint.dir  # where the trainer sees the checkpoints
    timeout = duration_seconds(train.fault_tolerance.hang_timeout)
    head = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    early: list[int] = []  # a SIGUSR1 before the trainer runs (during the restore) must not end us
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: early.append(signum))
    try:
        supervised = run_supervised(
            manifest,
            run_id=run_id,
            options=LocalRunOptions(
                ckpt_dir=ckpt_dir,
                command=srun_argv(train, run_id=run_id, head=head, container=container),
                interval=interval,
                insecure=insecure,
                env_overrides={podenv.RDZV_ENDPOINT: f"{head}:{RDZV_PORT}", **overrides},
                image=_image_ref(container.image) if container is not None else None,
                command_stdout=command_stdout,
            ),
            watch=Watch(
                signals=(signal.SIGUSR1,),
                hang=lambda: ProgressClock(ckpt_dir, heartbeat, timeout),
                job_id=job_id,
                nodes=allocation_nodes(SlurmHost()),
                act=lambda decision: _requeue(job_id, decision),
                probe=lambda node: check_node(SlurmHost(), job_id=job_id, node=node),
            ),
            on_push=on_push,
            on_decision=lambda decision: _restarting(job_id, decision),
        )
    finally:
        signal.signal(signal.SIGUSR1, previous)
    result = supervised.run
    if early and result.signal is None and result.exit_code:
        result = dataclasses.replace(result, signal="SIGUSR1")
    restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    return _conclude(supervised, job_id=job_id, restart=restart, result=result)


def _require_secrets(train: TrainSpec) -> None:
    """train.secretEnv comes from the environment sbatch ran in: a job without one of them
    stops before anything runs (a local run only warns)."""
    missing = [name for name in train.secret_env if not os.environ.get(name)]
    if missing:
        raise InputError(
            f"train.secretEnv {', '.join(missing)} is not set in the job's environment",
            hint="export it in the shell that runs `trainops train submit` (sbatch passes it on) and submit again",
        )


def _restarting(job_id: str, decision: Decision) -> None:
    if decision.action == "restart":
        _note(job_id, f"restarted in place: {decision.note}")


def _conclude(supervised: SupervisedRun, *, job_id: str, restart: int, result: LocalRunResult) -> SlurmRunResult:
    """Carry out what the diagnosis decided; else requeue on the time-limit signal, or end."""
    decision = supervised.decision
    if decision.action in ("requeue", "drain"):
        return SlurmRunResult(job_id, restart, "requeued", decision.note, result)
    if decision.action == "stop":
        _note(job_id, f"failed: {decision.note}")
        raise CommandFailedError(f"run {result.run_id} stopped: {decision.note}", status=result.exit_code or 1)
    if result.signal == "SIGUSR1":
        reason = "the time limit is near (SIGUSR1): checkpoint pushed"
        _note(job_id, f"requeued after start {restart}: {reason}")
        control(SlurmHost(), "scontrol", "requeue", job_id)
        return SlurmRunResult(job_id, restart, "requeued", reason, result)
    if result.signal is not None:
        return SlurmRunResult(job_id, restart, "stopped", f"{result.signal} from Slurm", result)
    return SlurmRunResult(job_id, restart, "completed", f"the trainer exited {result.exit_code}", result)


def _requeue(job_id: str, decision: Decision) -> str:
    """Drain the node (hardware) and requeue the job without it (node fault); what was done."""

    assert decision.diagnosis is not None
    node = decision.diagnosis.node
    host = SlurmHost()
    done = []
    if decision.action == "drain" and node:
        drain_node(host, node=node, reason=decision.diagnosis.summary)
        done.append(f"drained {node}")
    _note(job_id, f"requeued: {decision.note}")
    excluded = requeue_excluding(host, job_id=job_id, nodes=[node] if node else [])
    done.append(f"requeued job {job_id} excluding {','.join(excluded) or 'no node'}")
    return "; ".join(done)
