"""The training run under fault supervision: `run_local` in a loop that restarts in place.

Each start of the trainer is watched by a trainops.faults Monitor (its output lines, the
node-health sources, the checkpoints, the hang clock). When it fails, the session diagnoses
it and decides the action; a restart happens here, in the same allocation, from the newest
complete checkpoint; requeue, drain and stop are returned to the executor (Slurm carries
them out; a local run stops with the diagnosis).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import CommandFailedError
from trainops.faults.detect import Monitor
from trainops.faults.ettr import compute
from trainops.faults.hang import HEARTBEAT_ENV, ProgressClock
from trainops.faults.session import Decision, FaultSession, this_node
from trainops.faults.timeline import run_log_path
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.registry.context import Registries
from trainops.serialize import FLATTEN
from trainops.slo.exporter import TrainingMetrics, serve_metrics
from trainops.supervise import Supervision
from trainops.train.local import LocalRunOptions, LocalRunResult, default_checkpoint_dir, run_local

if TYPE_CHECKING:
    from trainops.checkpoint import PushedCheckpoint
    from trainops.faults.incidents import Incident
    from trainops.faults.verify import NodeProbe

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
    probe: NodeProbe | None = None  # asked before a node is excluded (trainops.faults.verify)
    log: Path | None = None  # where the trainer's output is kept too (a local run's, for `train logs`)


def run_supervised(
    manifest: Manifest,
    *,
    run_id: str,
    options: LocalRunOptions,
    watch: Watch,
    on_push: Callable[[PushedCheckpoint], None] | None = None,
    on_decision: Callable[[Decision], None] | None = None,
    on_start: Callable[[int | None, str | None], None] | None = None,
    on_restore: Callable[[str | None, str], None] | None = None,
) -> SupervisedRun:
    """Start the trainer until it completes or a fault needs more than a restart in place.
    Every start is `run_local` with `options` (whose ckpt_dir is set) and the supervision."""

    assert options.ckpt_dir is not None
    ckpt_dir = options.ckpt_dir
    kill_after = duration_seconds(manifest.require_train().faults.kill_after)
    with Registries.for_manifest(manifest, insecure=options.insecure) as registries:
        session = FaultSession(
            manifest, registries, run_id=run_id, job_id=watch.job_id, nodes=watch.nodes, probe=watch.probe
        )
        metrics = TrainingMetrics(pipeline=manifest.pipeline.metadata.name, run_id=run_id,
                                  ettr=lambda: compute(session.timeline, []).ettr)  # fmt: skip
        server = serve_metrics(metrics, manifest.require_train().metrics_address)
        recorded: list[Incident] = []
        starts = 0
        try:
            while True:
                starts += 1
                if starts > 1:
                    metrics.restarted()
                session.hang = watch.hang() if watch.hang is not None else None
                monitor = session.start()

                def on_line(line: str, stream: str = "stdout", monitor: Monitor = monitor) -> None:
                    monitor.on_line(line, stream)
                    metrics.on_line(line)

                def pushed(item: PushedCheckpoint) -> None:
                    session.saved(item.step, write_seconds(ckpt_dir / item.name))
                    metrics.checkpoint()
                    if on_push is not None:
                        on_push(item)

                def started(step: int | None, ref: str | None) -> None:
                    session.resumed(step, ref)
                    if on_start is not None:
                        on_start(step, ref)

                supervision = Supervision(
                    signals=watch.signals,
                    watchdog=session.watchdog,
                    kill_after=kill_after,
                    on_line=on_line,
                    log=watch.log,
                )
                run_options = dataclasses.replace(options, supervision=supervision)
                result = run_local(
                    manifest,
                    run_id=run_id,
                    options=run_options,
                    on_push=pushed,
                    on_start=started,
                    on_restore=on_restore,
                )
                decision = session.finish(code=result.exit_code, passed_on=result.signal)
                if _conclude(session, decision, watch=watch, recorded=recorded, on_decision=on_decision):
                    return SupervisedRun(result, starts, decision, recorded, session.warnings)
                log.warning("trainops: run %s: %s; restarting in place", run_id, decision.note)
        finally:
            session.close()
            if server is not None:
                server.close()


def _conclude(
    session: FaultSession,
    decision: Decision,
    *,
    watch: Watch,
    recorded: list[Incident],
    on_decision: Callable[[Decision], None] | None,
) -> bool:
    """Record a start's decision and act on it; True when the run ends there (anything but
    a restart in place): a requeue or drain is the watch's to carry out."""
    if decision.incident is not None:
        recorded.append(decision.incident)
    if on_decision is not None:
        on_decision(decision)
    if decision.action == "restart":
        return False
    if decision.action in ("requeue", "drain") and watch.act is not None:
        note = watch.act(decision)
        if decision.incident is not None:
            session.note_action(decision.incident, note)
    return True


@dataclass(frozen=True)
class LocalSupervisedRun:
    """What `train run --local` did: its starts, how it ended, the incidents it recorded."""

    starts: int
    action: str | None  # requeue, drain or stop: the run ended on a fault; None: it ended by itself
    fault: str | None  # the class of that fault
    note: str  # the last decision in one line (the diagnosis and the action, or how it ended)
    incidents: list[str]  # the ids of the incidents recorded (`trainops incidents show ID`)
    warnings: list[str]
    log: str  # the trainer's output, every start (`trainops train logs RUN`)
    run: LocalRunResult = field(metadata=FLATTEN)  # the last start's; in JSON beside these

    def raise_for_failure(self, *, hint: str) -> None:
        """A fault ended the run: exit 9 with the diagnosis; else the last start's verdict."""

        if self.action is not None and self.fault != "code-error":  # a plain failure: the command's status says it
            elsewhere = " (it needs another node: run it there)" if self.action != "stop" else ""
            raise CommandFailedError(
                f"run {self.run.run_id} stopped after {self.starts} start(s): {self.note}{elsewhere}",
                status=self.run.exit_code or 1,
                hint="`trainops incidents show ID` has the evidence",
            )
        self.run.raise_for_failure(hint=hint)


def run_local_supervised(
    manifest: Manifest,
    *,
    run_id: str,
    options: LocalRunOptions,
    on_push: Callable[[PushedCheckpoint], None] | None = None,
    on_start: Callable[[int | None, str | None], None] | None = None,
    on_restore: Callable[[str | None, str], None] | None = None,
) -> LocalSupervisedRun:
    """`train run --local` under fault supervision: the trainer's output, exit status,
    heartbeat ($TRAINOPS_HEARTBEAT_FILE, beside the checkpoint directory) and checkpoints, and
    train.faults.nodeHealth, watched as on Slurm; a transient fault restarts it here from the
    newest complete checkpoint, within faultTolerance.maxRetry; a fault that needs another
    node (requeue, drain) or no retry (stop) ends the run with the diagnosis (the result's
    decision). Each fault is an incident in the registry; the timeline gives `train status` ETTR.
    The trainer's output is kept too, at run_log_path (`train logs`); on_start and on_restore
    as run_local's, at each start."""

    train = manifest.require_train()
    ckpt_dir = (options.ckpt_dir or default_checkpoint_dir(manifest)).resolve()
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    heartbeat = ckpt_dir.parent / "heartbeat"
    log = run_log_path(manifest, run_id)
    timeout = duration_seconds(train.fault_tolerance.hang_timeout)
    env = {**(options.env_overrides or {}), HEARTBEAT_ENV: str(heartbeat)}
    supervised = run_supervised(
        manifest,
        run_id=run_id,
        options=dataclasses.replace(options, ckpt_dir=ckpt_dir, env_overrides=env),
        watch=Watch(hang=lambda: ProgressClock(ckpt_dir, heartbeat, timeout), nodes=[this_node()], log=log),
        on_push=on_push,
        on_start=on_start,
        on_restore=on_restore,
    )
    decision = supervised.decision
    return LocalSupervisedRun(
        starts=supervised.starts,
        action=decision.action,
        fault=decision.diagnosis.fault if decision.diagnosis else None,
        note=decision.note,
        incidents=[i.id for i in supervised.incidents],
        warnings=supervised.warnings,
        log=str(log),
        run=supervised.run,
    )
