"""The Slurm executor, `trainops train run --slurm`: the job's supervisor on its batch host.

The bare-metal sbatch script ends in it. It is `train run --local` (trainops.pipeline.local:
restore the newest checkpoint, run the command, push every complete checkpoint, pass
signals on) with the command started on every node by `srun`, and three things Slurm adds:

- **time limit**: sbatch's `--signal=B:USR1@grace` reaches this process (the batch shell
  exec'd it); the trainer gets SIGTERM, saves, the last checkpoint is pushed, then the job
  is put back in the queue (`scontrol requeue`) and its next start resumes from the registry;
- **hang**: no new checkpoint and no heartbeat (a file the trainer may touch,
  $TRAINOPS_HEARTBEAT_FILE) for faultTolerance.hangTimeout → SIGTERM, then SIGKILL, to the
  trainer, and a requeue; after faultTolerance.maxRetry hangs the run fails with the reason;
- **a note on the job**: each decision is written to the job's Comment (`scontrol show job`,
  `trainops train status`) and to `<run dir>/supervisor.json`, which counts the hangs
  across restarts.

A SIGTERM from Slurm (scancel, preemption, a node set down) is passed on the same way and
the job ends; Slurm itself requeues a `--requeue` job whose node failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from trainops.errors import CommandFailedError, UsageError
from trainops.pipeline.local import LocalRunOptions, LocalRunResult, run_local
from trainops.render.env import RDZV_PORT
from trainops.serialize import FLATTEN
from trainops.slurm.client import SlurmHost, control
from trainops.spec import Manifest
from trainops.spec.common import duration_seconds
from trainops.spec.stages import TrainSpec
from trainops.supervise import Supervision

log = logging.getLogger(__name__)

HEARTBEAT_ENV = "TRAINOPS_HEARTBEAT_FILE"
STATE_FILE = "supervisor.json"


@dataclass(frozen=True)
class SlurmRunResult:
    job_id: str
    restart: int  # SLURM_RESTART_COUNT: how many times the job was started before this one
    action: str  # "completed" | "requeued" | "stopped"
    reason: str
    run: LocalRunResult = field(metadata=FLATTEN)  # in JSON: the run's fields beside the job's


class ProgressClock:
    """When the trainer last showed progress: a change in the checkpoint directory (a new
    checkpoint, a file in it) or in the heartbeat file's mtime."""

    def __init__(self, ckpt_dir: Path, heartbeat: Path, timeout: float) -> None:
        self.ckpt_dir = ckpt_dir
        self.heartbeat = heartbeat
        self.timeout = timeout
        self.seen = self._fingerprint()
        self.last = time.monotonic()

    def _fingerprint(self) -> float:
        newest = 0.0
        paths = [self.heartbeat, self.ckpt_dir]
        if self.ckpt_dir.is_dir():
            paths += list(self.ckpt_dir.iterdir())
        for path in paths:
            try:
                newest = max(newest, path.stat().st_mtime)
            except OSError:
                continue
        return newest

    def __call__(self) -> str | None:
        """The watchdog: None while progress is recent, else why the trainer counts as hung."""
        now = time.monotonic()
        current = self._fingerprint()
        if current != self.seen:
            self.seen, self.last = current, now
            return None
        if now - self.last < self.timeout:
            return None
        return f"no new checkpoint or heartbeat for {self.timeout:g} s (faultTolerance.hangTimeout)"


def _state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def srun_argv(train: TrainSpec, *, run_id: str, head: str) -> list[str]:
    """train.command on every node of the allocation, one task per node (torchrun for python)."""
    from trainops.render.env import launch_argv

    command = launch_argv(list(train.command), train=train, endpoint=f"{head}:{RDZV_PORT}", run_id=run_id)
    return ["srun", f"--nodes={train.nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", *command]


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
    interval: float = 2.0,
    insecure: bool = False,
    on_push: Any = None,
    command_stdout: IO[Any] | None = None,
) -> SlurmRunResult:
    """Supervise this allocation's training (module docstring); requeue or fail as it ends."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise UsageError("train run --slurm runs inside a Slurm job (SLURM_JOB_ID is not set)", hint="use --local here")
    train = manifest.require_train()
    ckpt_dir = ckpt_dir.resolve()
    run_dir = ckpt_dir.parent
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    clock = ProgressClock(ckpt_dir, run_dir / "heartbeat", duration_seconds(train.fault_tolerance.hang_timeout))
    head = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    early: list[int] = []  # a SIGUSR1 before the trainer runs (during the restore) must not end us
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: early.append(signum))
    try:
        run_options = LocalRunOptions(
            ckpt_dir=ckpt_dir,
            command=srun_argv(train, run_id=run_id, head=head),
            interval=interval,
            insecure=insecure,
            env_overrides={"TRAINOPS_RDZV_ENDPOINT": f"{head}:{RDZV_PORT}", HEARTBEAT_ENV: str(clock.heartbeat)},
            command_stdout=command_stdout,
            supervision=Supervision(
                signals=(signal.SIGUSR1,),
                watchdog=clock,
                kill_after=duration_seconds(train.checkpoint.grace_period),
            ),
        )
        result = run_local(manifest, run_id=run_id, options=run_options, on_push=on_push)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    if early and result.signal is None and result.exit_code:
        result = dataclasses.replace(result, signal="SIGUSR1")
    restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    return _conclude(train, job_id=job_id, restart=restart, state_file=run_dir / STATE_FILE, result=result)


def _conclude(
    train: TrainSpec, *, job_id: str, restart: int, state_file: Path, result: LocalRunResult
) -> SlurmRunResult:
    """Requeue after a hang (up to maxRetry) or the time-limit signal; fail after too many hangs."""
    state = _state(state_file)
    outcome = SlurmRunResult(job_id, restart, "completed", f"the trainer exited {result.exit_code}", result)
    if result.stopped is not None:
        hangs = int(state.get("hangs", 0)) + 1
        state["hangs"] = hangs
        state.setdefault("events", []).append({"restart": restart, "hang": result.stopped})
        _save_state(state_file, state)
        limit = train.fault_tolerance.max_retry
        if hangs > limit:
            reason = f"hung {hangs} times ({result.stopped}); faultTolerance.maxRetry is {limit}"
            _note(job_id, f"failed: {reason}")
            raise CommandFailedError(f"run {result.run_id} failed: {reason}", status=result.exit_code)
        reason = f"hang {hangs} of at most {limit}: {result.stopped}"
        outcome = SlurmRunResult(job_id, restart, "requeued", reason, result)
    elif result.signal == "SIGUSR1":
        reason = "the time limit is near (SIGUSR1): checkpoint pushed"
        outcome = SlurmRunResult(job_id, restart, "requeued", reason, result)
    elif result.signal is not None:
        return SlurmRunResult(job_id, restart, "stopped", f"{result.signal} from Slurm", result)
    if outcome.action == "requeued":
        _note(job_id, f"requeued after start {restart}: {outcome.reason}")
        control(SlurmHost(), "scontrol", "requeue", job_id)
        return outcome
    if result.exit_code:
        _note(job_id, f"failed: the trainer exited {result.exit_code}")
    result.raise_for_failure(hint="the job's output file says why; `trainops train submit` starts a new run")
    return outcome
