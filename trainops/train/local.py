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

SIGTERM or SIGINT to trainops is passed on to the command as SIGTERM (which may checkpoint),
then the last scan runs; on Ctrl-C (SIGINT) trainops exits 130 saying what was pushed, and
a second Ctrl-C kills the command. The command stays in trainops' process group, so what
ends the terminal's group (closing it, a kill of the group) ends the trainer too. A command
killed outright (SIGKILL, OOM) leaves its half-written checkpoint behind, and the watcher
never pushes it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from trainops import podenv
from trainops.errors import CommandFailedError, ExistsError, InputError, RemoteError, TrainopsError
from trainops.gitinfo import git_state
from trainops.image.pinned import training_image
from trainops.interrupt import Interrupted
from trainops.manifest import Manifest
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.lineage_data import Environment, Lineage, Parent
from trainops.registry.reference import Reference
from trainops.render.env import process_env
from trainops.render.image import cluster_image
from trainops.supervise import Supervision, run_command, status_text

if TYPE_CHECKING:
    from trainops.checkpoint import PushedCheckpoint, Watcher


# A person's Ctrl-C: exit 130 whatever the trainer's status. SIGTERM (preemption, a
# scheduler's cancel) stays the trainer's failure (exit 9, its status), as a pod reports it.
STOP_SIGNALS = frozenset({"SIGINT"})


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
    signal: str | None = None  # the first signal passed on to the command (SIGTERM, SIGUSR1, …)
    stopped: str | None = None  # why the watchdog stopped the command (a hang), if it did
    resumed_step: int | None = None  # the step of the checkpoint the command resumed from

    def raise_for_failure(self, *, hint: str) -> None:
        """The one verdict on a run: the command failed (exit 9, with its status; `hint` says
        what to do next), or its last checkpoints did not reach the registry (exit 6)."""

        if self.signal in STOP_SIGNALS and self.stopped is None:
            raise self.interrupted()
        if self.exit_code:
            raise CommandFailedError(
                f"train.command {status_text(self.exit_code)} (run {self.run_id}); "
                f"{len(self.pushed)} checkpoint(s) pushed to {self.repository}",
                status=self.exit_code,
                hint=hint,
            )
        if self.final_scan_failed:
            raise RemoteError(
                f"training finished but its last checkpoints could not be pushed to {self.repository}",
                hint=f"`trainops ckpt watch {self.checkpoint_dir} --once --run-id {self.run_id}` pushes them "
                "(a run that resumes pushes them first too)",
            )

    def interrupted(self) -> Interrupted:
        """Ctrl-C to trainops, passed on to the trainer as SIGTERM: exit 130, saying what
        reached the registry and how to go on, whatever status the trainer ended with."""
        newest = f", the newest {self.pushed[-1].ref}" if self.pushed else ""
        lost = (
            "; its last checkpoints could not be pushed (a resumed run pushes them first)"
            if self.final_scan_failed
            else ""
        )
        return Interrupted(
            f"train.command stopped on {self.signal} (run {self.run_id}): "
            f"{len(self.pushed)} checkpoint(s) pushed to {self.repository}{newest}{lost}; "
            "run the same command again to resume from the newest checkpoint"
        )


def pinned_image(manifest: Manifest, *, image: str, insecure: bool = False) -> Any:
    """--image as the run names it: pinned to its digest (a tag is resolved now)."""

    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        return training_image(manifest, registries, image=image)


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
    image: Reference | None,
    base: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The command's environment: the caller's, then the pod contract; and the secretEnv
    names the caller's environment does not provide (locally their values come from it)."""

    train = manifest.require_train()
    git = git_state(manifest.root)
    contract = process_env(
        pipeline=manifest.pipeline.metadata.name,
        run_id=run_id,
        image=cluster_image(image) if image is not None else "",
        digest=(image.digest or "") if image is not None else "",
        ckpt_dir=str(ckpt_dir),
        repository=repository.repo_url,
        commit=git.commit if git else None,
        train=train,
        endpoint=None,
    )
    env = dict(base)
    env.update((name, value) for name, value in contract if value)  # no image is known for a local run
    env.update(podenv.LOCAL_RANKS)
    env["MASTER_PORT"] = str(_free_port())
    env.update(overrides or {})
    missing = sorted(name for name in train.secret_env if name not in base)
    return env, missing


def default_checkpoint_dir(manifest: Manifest, fresh_run: str | None = None) -> Path:
    """Where a local run keeps its checkpoints: stable, so a restarted run resumes from them;
    a fresh start's own (fresh_run: its run id), so it resumes from nothing."""
    runs = manifest.root / ".trainops" / "runs" / manifest.pipeline.metadata.name
    return runs / "fresh" / fresh_run / "checkpoints" if fresh_run else runs / "checkpoints"


class _Where(NamedTuple):
    """Where a local run's checkpoints go: the repository, the directory, the run."""

    repository: Reference
    directory: Path
    run_id: str


@dataclass(frozen=True)
class _Restored:
    ref: str | None
    note: str


def _restore(
    manifest: Manifest,
    registries: Registries,
    where: _Where,
    *,
    options: LocalRunOptions,
    progress: ProgressSink | None,
) -> _Restored:
    """Step 1: bring the checkpoint to resume from into the directory (checkpoint.resume);
    nothing for a fresh start."""
    from trainops.checkpoint import restore_latest, restore_ref  # lazy: loads sqlite3, concurrent.futures

    if options.fresh:
        return _Restored(None, "a fresh start: nothing restored")
    policy = manifest.require_train().checkpoint
    repository, directory, run_id = where
    if policy.resume == "none":
        _refuse_foreign_checkpoints(registries, repository=repository, run_id=run_id)
        return _Restored(None, "checkpoint.resume is none: starting from what the directory holds")
    if policy.resume == "latest":
        outcome = restore_latest(
            registries, repository=repository, directory=directory, layout=policy.layout, progress=progress
        )
    else:
        outcome = restore_ref(registries, ref=registries.ref(policy.resume), directory=directory, progress=progress)
    return _Restored(outcome.restored.ref if outcome.restored else None, outcome.reason)


def _watcher(
    manifest: Manifest,
    registries: Registries,
    where: _Where,
    *,
    options: LocalRunOptions,
    progress: ProgressSink | None,
) -> Watcher:
    """Step 3's watcher: pushes the run's complete checkpoints with its lineage, keeps retention."""
    from trainops.checkpoint import WatchConfig, Watcher  # lazy: loads sqlite3, concurrent.futures
    from trainops.signing.attest import checkpoint_attester  # lazy: loads sqlite3

    policy = manifest.require_train().checkpoint
    git = git_state(manifest.root)
    repository, directory, run_id = where
    image = options.image
    lineage = Lineage(
        pipeline=manifest.pipeline.metadata.name,
        git_commit=git.commit if git else None,
        git_repo=git.remote if git else None,
        image_digest=image.digest if image else None,
        environment=None if image else options.environment,
    )
    config = WatchConfig(
        directory=directory,
        repository=repository,
        run_id=run_id,
        layout=policy.layout,
        keep=policy.keep,
        lineage=lineage,
        interval=options.interval,
        settle=options.settle,
        image=image,
        dedup=policy.dedup,
        take_over=options.fresh,
    )
    config.attest = checkpoint_attester(manifest, registries)
    return Watcher(registries, config, progress=progress)


class _Scans:
    """The watcher's scans during a run: what was pushed, and the failures (retried next scan)."""

    def __init__(self, watcher: Watcher, on_push: Callable[[PushedCheckpoint], None] | None) -> None:
        self.watcher, self.on_push = watcher, on_push
        self.pushed: list[PushedCheckpoint] = []
        self.errors: list[str] = []

    def scan(self, final: bool = False) -> bool:
        try:
            for item in self.watcher.scan(final=final):
                self.pushed.append(item)
                if self.on_push is not None:
                    self.on_push(item)
        except TrainopsError as err:  # the registry hiccuped: training goes on, the next scan retries
            self.errors.append(str(err))
            return False
        return True


@dataclass(frozen=True)
class LocalRunOptions:
    """How a local run goes, beyond the manifest (each field defaults to what `train run --local` does)."""

    ckpt_dir: Path | None = None  # default: .trainops/runs/<pipeline>/checkpoints beside the manifest
    image: Reference | None = None  # the pinned training image, recorded in lineage
    command: list[str] | None = None  # default: train.command
    interval: float = 2.0  # seconds between checkpoint scans
    settle: float = 5.0  # quiet time before a marker-less checkpoint counts
    insecure: bool = False
    base_env: Mapping[str, str] | None = None  # default: this process's environment
    env_overrides: Mapping[str, str] | None = None  # over train.env (-e KEY=VALUE)
    command_stdout: int | IO[Any] | None = None  # default: this process's stdout
    supervision: Supervision | None = None  # signals to pass on, a watchdog (Slurm's hang detection)
    environment: Environment | None = None  # without an image: the interpreter, for lineage
    # from step 0: nothing restored, a checkpoint directory of the run's own, and the run's
    # step-N tags replace an older run's (`trainops run --fresh`)
    fresh: bool = False


def run_local(
    manifest: Manifest,
    *,
    run_id: str,
    options: LocalRunOptions = LocalRunOptions(),
    on_push: Callable[[PushedCheckpoint], None] | None = None,
    progress: ProgressSink | None = None,
    on_start: Callable[[int | None, str | None], None] | None = None,
    on_restore: Callable[[str | None, str], None] | None = None,
) -> LocalRunResult:
    """Restore, train and watch, as described in the module docstring.

    The command's stdout is this process's unless options.command_stdout says otherwise
    (the CLI sends it to stderr under `-o json`, so stdout carries the result alone). The
    command's exit status is in the result (`raise_for_failure` turns a failure into the
    error every caller reports). on_start: the step and checkpoint the command resumes from
    (None: from scratch), just before it starts; on_restore: what was restored, and why.
    """
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures

    if not (argv := list(options.command or manifest.require_train().command)):
        raise InputError("train.command is empty", hint="set train.command to the training program")
    directory = (options.ckpt_dir or default_checkpoint_dir(manifest, run_id if options.fresh else None)).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    with Registries.for_manifest(manifest, insecure=options.insecure) as registries:
        repository = checkpoint_repository(registries, manifest=manifest, environ={})
        where = _Where(repository, directory, run_id)
        restored = _restore(manifest, registries, where, options=options, progress=progress)
        if on_restore is not None:
            on_restore(restored.ref, restored.note)
        watcher = _watcher(manifest, registries, where, options=options, progress=progress)
        base = os.environ if options.base_env is None else options.base_env
        env, missing = local_environment(
            manifest, run_id=run_id, ckpt_dir=directory, repository=repository, image=options.image,
            base=base, overrides=options.env_overrides,
        )  # fmt: skip
        scans = _Scans(watcher, on_push)
        scans.scan()  # complete checkpoints a killed run left behind are pushed before it resumes
        resumed_from = watcher.resumed_from
        if on_start is not None:
            on_start(watcher.resumed_step, resumed_from.ref if resumed_from else None)
        outcome = run_command(
            argv,
            cwd=manifest.root,
            env=env,
            interval=options.interval,
            tick=scans.scan,
            stdout=options.command_stdout,
            supervision=options.supervision,
        )
        final_ok = scans.scan(final=True)
    return LocalRunResult(
        run_id=run_id,
        exit_code=outcome.code,
        checkpoint_dir=str(directory),
        repository=repository.repo_url,
        restored=restored.ref,
        restore_note=restored.note,
        resumed_from=resumed_from,
        pushed=scans.pushed,
        watcher_errors=scans.errors,
        final_scan_failed=not final_ok,
        missing_secret_env=missing,
        signal=outcome.signal,
        stopped=outcome.stopped,
        resumed_step=watcher.resumed_step,
    )


def _refuse_foreign_checkpoints(registries: Registries, *, repository: Reference, run_id: str) -> None:
    """With resume: none a run starts at step 0, so its step-N tags would meet another run's."""
    from trainops.checkpoint import latest_checkpoint  # lazy: loads concurrent.futures

    newest = latest_checkpoint(registries, repository=repository)
    if newest is not None and newest.run_id != run_id:
        raise ExistsError(
            f"{repository.repo_url} holds checkpoints of run {newest.run_id} (up to step {newest.step}) and "
            "checkpoint.resume is none: this run's step-N tags would collide with them",
            hint="set train.checkpoint.repository to a repository for this experiment, "
            "resume from them (resume: latest), or remove them with `trainops ckpt prune`",
        )
