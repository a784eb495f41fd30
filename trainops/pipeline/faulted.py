"""The training run under fault supervision: `run_local` in a loop that restarts in place.

Each start of the trainer is watched by a trainops.faults Monitor (its output lines, the
node-health sources, the checkpoints, the hang clock). When it fails, the session diagnoses
it and decides the action; a restart happens here, in the same allocation, from the newest
complete checkpoint; requeue, drain and stop are returned to the executor (Slurm carries
them out; a local run stops with the diagnosis).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from trainops.faults.hang import ProgressClock
from trainops.faults.session import Decision, FaultSession
from trainops.pipeline.local import LocalRunOptions, LocalRunResult, run_local
from trainops.spec import Manifest
from trainops.spec.common import duration_seconds
from trainops.supervise import Supervision

if TYPE_CHECKING:
    from trainops.checkpoint import PushedCheckpoint
    from trainops.faults.incidents import Incident
    from trainops.registry.reference import Reference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SupervisedRun:
    run: LocalRunResult  # the last start's
    starts: int
    decision: Decision
    incidents: list[Incident] = field(default_factory=list)  # recorded by this supervisor
    warnings: list[str] = field(default_factory=list)


def write_seconds(directory: Path) -> float:
    """How long a checkpoint took to write: its oldest to its newest file's mtime."""
    times = []
    for path in [directory, *directory.rglob("*")]:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times) - min(times) if times else 0.0


@dataclass(frozen=True)
class Watch:
    """What the executor adds to each start: signals passed on, the hang clock's factory."""

    signals: tuple[int, ...] = ()
    hang: Callable[[], ProgressClock] | None = None
    job_id: str | None = None
    nodes: list[str] = field(default_factory=list)
    act: Callable[[Decision], str] | None = None  # carries out requeue/drain; what it did, in words


def run_supervised(
    manifest: Manifest,
    *,
    run_id: str,
    ckpt_dir: Path,
    command: list[str] | None = None,
    watch: Watch,
    interval: float = 2.0,
    insecure: bool = False,
    on_push: Callable[[PushedCheckpoint], None] | None = None,
    env_overrides: Mapping[str, str] | None = None,
    image: Reference | None = None,
    command_stdout: IO[Any] | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> SupervisedRun:
    """Start the trainer until it completes or a fault needs more than a restart in place."""
    from trainops.registry.context import Registries

    kill_after = duration_seconds(manifest.require_train().faults.kill_after)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        session = FaultSession(manifest, registries, run_id=run_id, job_id=watch.job_id, nodes=watch.nodes)
        recorded: list[Incident] = []
        starts = 0
        try:
            while True:
                starts += 1
                session.hang = watch.hang() if watch.hang is not None else None
                monitor = session.start()

                def pushed(item: PushedCheckpoint) -> None:
                    session.saved(item.step, write_seconds(ckpt_dir / item.name))
                    if on_push is not None:
                        on_push(item)

                supervision = Supervision(
                    signals=watch.signals, watchdog=session.watchdog, kill_after=kill_after, on_line=monitor.on_line
                )
                run_options = LocalRunOptions(
                    ckpt_dir=ckpt_dir,
                    command=command,
                    interval=interval,
                    insecure=insecure,
                    env_overrides=env_overrides,
                    image=image,
                    command_stdout=command_stdout,
                    supervision=supervision,
                )
                result = run_local(
                    manifest, run_id=run_id, options=run_options, on_push=pushed, on_start=session.resumed
                )
                decision = session.finish(code=result.exit_code, passed_on=result.signal)
                if decision.incident is not None:
                    recorded.append(decision.incident)
                if on_decision is not None:
                    on_decision(decision)
                if decision.action != "restart":
                    if decision.action in ("requeue", "drain") and watch.act is not None:
                        note = watch.act(decision)
                        if decision.incident is not None:
                            session.note_action(decision.incident, note)
                    return SupervisedRun(result, starts, decision, recorded, session.warnings)
                log.warning("trainops: run %s: %s; restarting in place", run_id, decision.note)
        finally:
            session.close()
