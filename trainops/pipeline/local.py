"""`trainops train run --local`: the training command in a subprocess, with a pod's contract.

The run goes through the same three steps a cluster pod does:

1. **restore** — with `checkpoint.resume: latest`, the newest checkpoint in the registry is
   pulled into the checkpoint directory unless the directory already holds one at least as
   new (a restarted run on the same machine), so a replaced node resumes from the registry;
2. **train** — `train.command` runs in the manifest's directory with the environment a pod
   gets (TRAINOPS_CKPT_DIR, TRAINOPS_RUN_ID, RANK, WORLD_SIZE, MASTER_ADDR, …, NCCL and
   torch.distributed settings, train.env);
3. **watch** — beside it, the checkpoint watcher pushes every complete checkpoint with
   lineage (run, step, metrics, image, the checkpoint it resumed from) and applies the
   retention policy; when the command ends, one last scan pushes what it wrote last.

SIGTERM or SIGINT to trainops is passed on to the command (which may checkpoint), then the
last scan runs. A command killed outright (SIGKILL, OOM) leaves its half-written checkpoint
behind, and the watcher never pushes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from trainops.errors import InputError, TrainopsError
from trainops.pipeline.context import checkpoint_repository, registries_for, train_spec
from trainops.registry.artifact import Environment, Lineage, Parent
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.reference import Reference
from trainops.spec import Manifest

if TYPE_CHECKING:
    from trainops.checkpoint import PushedCheckpoint


@dataclass(frozen=True)
class LocalRunResult:
    run_id: str
    exit_code: int
    checkpoint_dir: str
    repository: str
    restored: str | None  # the checkpoint pulled from the registry before the run, if any
    restore_note: str
    resumed_from: Parent | None
    pushed: list[PushedCheckpoint] = field(default_factory=list)
    watcher_errors: list[str] = field(default_factory=list)
    final_scan_failed: bool = False  # the last checkpoints may not be in the registry
    missing_secret_env: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "exitCode": self.exit_code,
            "checkpointDir": self.checkpoint_dir,
            "repository": self.repository,
            "restored": self.restored,
            "restoreNote": self.restore_note,
            "resumedFrom": self.resumed_from.model_dump(by_alias=True) if self.resumed_from else None,
            "pushed": [{"name": p.name, "step": p.step, "ref": p.ref, "digest": p.digest} for p in self.pushed],
            "watcherErrors": self.watcher_errors,
            "finalScanFailed": self.final_scan_failed,
            "missingSecretEnv": self.missing_secret_env,
        }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_environment(
    manifest: Manifest,
    *,
    run_id: str,
    ckpt_dir: Path,
    repository: Reference,
    image: str | None,
    base: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The command's environment: the caller's, then the pod contract; and the secretEnv
    names the caller's environment does not provide (locally their values come from it)."""
    from trainops.gitinfo import git_state
    from trainops.render.env import process_env

    train = train_spec(manifest)
    git = git_state(manifest.root)
    contract = process_env(
        pipeline=manifest.pipeline.metadata.name,
        run_id=run_id,
        image=image or "",
        digest=image.rsplit("@", 1)[1] if image and "@" in image else "",
        ckpt_dir=str(ckpt_dir),
        repository=repository.repo_url,
        commit=git.commit if git else None,
        train=train,
        endpoint=None,
    )
    env = dict(base)
    env.update((name, value) for name, value in contract if value)  # no image is known for a local run
    env.update(
        RANK="0",
        LOCAL_RANK="0",
        NODE_RANK="0",
        GROUP_RANK="0",
        TRAINOPS_NODE_RANK="0",
        WORLD_SIZE="1",
        LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
    )
    env.update(overrides or {})
    missing = sorted(name for name in train.secret_env if name not in base)
    return env, missing


def default_checkpoint_dir(manifest: Manifest) -> Path:
    """Where a local run keeps its checkpoints: stable, so a restarted run resumes from them."""
    return manifest.root / ".trainops" / "runs" / manifest.pipeline.metadata.name / "checkpoints"


def run_local(
    manifest: Manifest,
    *,
    run_id: str,
    ckpt_dir: Path | None = None,
    image: Reference | None = None,
    command: list[str] | None = None,
    interval: float = 2.0,
    settle: float = 5.0,
    insecure: bool = False,
    on_push: Callable[[PushedCheckpoint], None] | None = None,
    progress: ProgressSink | None = None,
    base_env: Mapping[str, str] | None = None,
    env_overrides: Mapping[str, str] | None = None,
    command_stdout: int | IO[Any] | None = None,
    environment: Environment | None = None,
) -> LocalRunResult:
    """Restore, train and watch, as described in the module docstring.

    The command's stdout is this process's unless command_stdout says otherwise (the CLI
    sends it to stderr under `-o json`, so stdout carries the result alone). Without an
    image, `environment` (the interpreter and its packages) goes into every checkpoint's lineage.
    """
    from trainops.checkpoint import WatchConfig, Watcher, restore_latest
    from trainops.gitinfo import git_state

    train = train_spec(manifest)
    policy = train.checkpoint
    argv = list(command or train.command)
    if not argv:
        raise InputError("train.command is empty", hint="set train.command to the training program")
    directory = (ckpt_dir or default_checkpoint_dir(manifest)).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    registries = registries_for(manifest, insecure=insecure)
    try:
        repository = checkpoint_repository(manifest, registries)
        restored: str | None = None
        note = "checkpoint.resume is none: starting from what the directory holds"
        if policy.resume == "latest":
            outcome = restore_latest(
                registries, repository=repository, directory=directory, layout=policy.layout, progress=progress
            )
            restored = outcome.restored.ref if outcome.restored else None
            note = outcome.reason
        elif policy.resume == "none":
            _refuse_foreign_checkpoints(registries, repository=repository, run_id=run_id)
        else:
            from trainops.checkpoint import restore_ref

            outcome = restore_ref(registries, ref=registries.ref(policy.resume), directory=directory, progress=progress)
            restored = outcome.restored.ref if outcome.restored else None
            note = outcome.reason

        git = git_state(manifest.root)
        image_text = None
        if image is not None:
            from trainops.pipeline.context import cluster_image

            image_text = cluster_image(image)
        lineage = Lineage(
            pipeline=manifest.pipeline.metadata.name,
            git_commit=git.commit if git else None,
            git_repo=git.remote if git else None,
            image_digest=image.digest if image else None,
            environment=None if image else environment,
        )
        watcher = Watcher(
            registries,
            WatchConfig(
                directory=directory,
                repository=repository,
                run_id=run_id,
                layout=policy.layout,
                keep=policy.keep,
                lineage=lineage,
                interval=interval,
                settle=settle,
            ),
            progress=progress,
        )
        env, missing = local_environment(
            manifest,
            run_id=run_id,
            ckpt_dir=directory,
            repository=repository,
            image=image_text,
            base=os.environ if base_env is None else base_env,
            overrides=env_overrides,
        )
        pushed: list[PushedCheckpoint] = []
        errors: list[str] = []

        def scan(final: bool) -> bool:
            try:
                for item in watcher.scan(final=final):
                    pushed.append(item)
                    if on_push is not None:
                        on_push(item)
            except TrainopsError as err:  # the registry hiccuped: training goes on, the next scan retries
                errors.append(str(err))
                return False
            return True

        scan(final=False)  # complete checkpoints a killed run left behind are pushed before it resumes
        resumed_from = watcher.resumed_from
        exit_code = _supervise(
            argv, cwd=manifest.root, env=env, interval=interval, tick=lambda: scan(False), stdout=command_stdout
        )
        final_ok = scan(final=True)
        return LocalRunResult(
            run_id=run_id,
            exit_code=exit_code,
            checkpoint_dir=str(directory),
            repository=repository.repo_url,
            restored=restored,
            restore_note=note,
            resumed_from=resumed_from,
            pushed=pushed,
            watcher_errors=errors,
            final_scan_failed=not final_ok,
            missing_secret_env=missing,
        )
    finally:
        registries.close()


def _refuse_foreign_checkpoints(registries: Registries, *, repository: Reference, run_id: str) -> None:
    """With resume: none a run starts at step 0, so its step-N tags would meet another run's."""
    from trainops.checkpoint import latest_checkpoint
    from trainops.errors import ExistsError

    newest = latest_checkpoint(registries, repository=repository)
    if newest is not None and newest.run_id != run_id:
        raise ExistsError(
            f"{repository.repo_url} holds checkpoints of run {newest.run_id} (up to step {newest.step}) and "
            "checkpoint.resume is none: this run's step-N tags would collide with them",
            hint="set train.checkpoint.repository to a repository for this experiment, "
            "resume from them (resume: latest), or remove them with `trainops ckpt prune`",
        )


def _supervise(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    interval: float,
    tick: Callable[[], object],
    stdout: int | IO[Any] | None,
    timeout: float | None = None,
    group: bool = False,
    what: str = "train.command",
) -> int:
    """Run argv; call tick every interval while it runs; pass SIGTERM/SIGINT on to it.

    The watcher scans on this thread between waits, so a scan never overlaps another.
    Returns the command's exit code (128+N when a signal N ended it, as a shell reports).
    With group, the command runs in its own process group, which is killed when the command
    ends (nothing it started outlives it) or after `timeout` seconds; the timeout raises
    subprocess.TimeoutExpired.
    """
    try:
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, start_new_session=group)
    except FileNotFoundError:
        raise InputError(f"{what}: {argv[0]!r} not found", hint=f"install it, or fix {what} in trainops.yaml") from None
    except PermissionError:
        raise InputError(f"{what}: {argv[0]!r} is not executable", hint="chmod +x it or fix the path") from None
    forwarded = threading.Event()
    deadline = None if timeout is None else time.monotonic() + timeout

    def signal_child(signum: int) -> None:
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)
        elif child.poll() is None:
            child.send_signal(signum)

    def forward(signum: int, _frame: FrameType | None) -> None:
        forwarded.set()
        if child.poll() is None:
            signal_child(signal.SIGTERM if signum == signal.SIGINT else signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGTERM, signal.SIGINT):
            previous[number] = signal.signal(number, forward)
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(argv, timeout or 0.0)
            try:
                code = child.wait(timeout=interval if left is None else min(interval, left))
                break
            except subprocess.TimeoutExpired:
                tick()
    finally:
        for key, handler in previous.items():
            signal.signal(key, handler)
        if group:  # what the command started dies with it
            signal_child(signal.SIGKILL)
        if child.poll() is None:  # an exception on this thread: do not leave the command running
            child.kill()
            child.wait()
    return 128 - code if code < 0 else code
