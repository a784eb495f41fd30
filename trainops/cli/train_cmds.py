"""The `train` group: render the job, submit it to the GitOps repo, or run it here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops import clock, runid
from trainops.cli import options
from trainops.cli.options import (
    key_values,
    kubeconfig_options,
    manifest_options,
    output_option,
    render_out_option,
)
from trainops.cli.output import duration_text, echo_columns, echo_json, phases_text

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess

_image_option = options.image_option(
    "Training image (name@sha256:…, or a tag resolved now); default: train.image, else the image built for HEAD."
)
_run_id_option = options.run_id_option("Run id (default: a new one).")


def _announcer(output: str) -> Any:
    """A line on stderr per checkpoint pushed (text output only)."""

    def announce(item: Any) -> None:
        if output == "text":
            click.echo(f"trainops: pushed {item.name} (step {item.step}) → {item.ref}", err=True)

    return announce


@click.group()
def train() -> None:
    """Training: render the scheduler job, submit it through GitOps, or run it locally."""


@train.command("render")
@manifest_options
@render_out_option
@_image_option
@_run_id_option
@options.insecure_option
@output_option
def render_cmd(
    file: str | None,
    env: str | None,
    out: Path | None,
    image: str | None,
    run_id: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Render the training job (and the tenants' queues) for the manifest's scheduler."""
    from trainops.train.target import manifest_target  # lazy: loads pydantic

    target = manifest_target(options.load(file, env))
    result: Any = target.render(run_id=runid.given_or_new(run_id, "run"), image=image, insecure=insecure, out=out)
    if output == "json":
        echo_json(result)
        return
    if out is None:
        click.echo(result.text, nl=False)
        return
    click.echo(
        f"rendered {len(result.files)} files into {result.directory} (run {result.run_id}, image {result.image})"
    )
    for name in result.files:
        click.echo(f"  {name}")


@train.command("submit")
@manifest_options
@_image_option
@_run_id_option
@options.cluster_options("Check first that your cluster serves the job's kind (its CRD installed).")
@options.insecure_option
@output_option
def submit_cmd(
    file: str | None,
    env: str | None,
    image: str | None,
    run_id: str | None,
    access: ClusterAccess | None,
    insecure: bool,
    output: str,
) -> None:
    """Commit the rendered job to the GitOps repository (with trailers) and push it.

    With --cluster, --kubeconfig or --context, the cluster is asked first whether it serves
    the job's kind (KubeRay's RayJob, Kubeflow's TrainJob, …) and, for a TrainJob, runs the
    Trainer controller and has the runtime it names: if not, the error says what to install,
    and nothing is committed.
    """
    from trainops.train.target import manifest_target  # lazy: loads pydantic

    target = manifest_target(options.load(file, env), access)
    result = target.submit(run_id=runid.given_or_new(run_id, "run"), image=image, insecure=insecure)
    if output == "json":
        echo_json(result)
        return
    if result.job_id:
        click.echo(f"submitted run {result.run_id} as Slurm job {result.job_id}")
    if not result.changed:
        click.echo(f"{result.repo} {result.branch}:{result.path} already holds this render; nothing committed")
        return
    tries = f" after {result.attempts} attempts" if result.attempts > 1 else ""
    click.echo(
        f"committed {str(result.commit)[:12]} to {result.repo} {result.branch}:{result.path}{tries} "
        f"(run {result.run_id}, {len(result.files)} files, {len(result.removed)} removed)"
    )


@train.command("run")
@manifest_options
@click.option("--local", "mode", flag_value="local", help="Run here, in a subprocess.")
@click.option(
    "--slurm",
    "mode",
    flag_value="slurm",
    help="Supervise a Slurm job from its batch host (what the sbatch script runs); with --image, under pyxis.",
)
@_run_id_option
@click.option(
    "--ckpt-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoint directory (default: .trainops/runs/<pipeline>/checkpoints beside trainops.yaml).",
)
@_image_option
@click.option(
    "-e",
    "--setenv",
    "setenv",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a variable for the command, over train.env (repeatable).",
)
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between checkpoint scans.")
@options.insecure_option
@output_option
def run_cmd(
    file: str | None,
    env: str | None,
    mode: str | None,
    run_id: str | None,
    ckpt_dir: Path | None,
    image: str | None,
    setenv: tuple[str, ...],
    interval: float,
    insecure: bool,
    output: str,
) -> None:
    """Run train.command here with a pod's environment; push each complete checkpoint.

    With checkpoint.resume: latest it first pulls the newest checkpoint from the registry
    unless the checkpoint directory already holds one at least as new. The trainer is
    supervised (output, exit status, heartbeat, checkpoints, train.faults.nodeHealth): each
    fault is an incident (`trainops incidents`); a transient one (crash, hang, NCCL timeout)
    restarts it here from the newest checkpoint, up to faultTolerance.maxRetry; one that
    retrying cannot fix (OOM, NaN loss) or that needs another node stops the run: exit 9 with
    the diagnosis, as for a failed command (its own status). With --slurm
    (inside a job) the command runs on every node with srun (in the container of --image:
    pyxis), hangs are detected and the job is requeued on the time-limit signal.
    """
    if mode is None:
        raise click.UsageError("pass --local (run here) or --slurm (inside a Slurm job)")
    manifest = options.load(file, env)
    if mode == "slurm":
        _run_slurm(
            manifest, run_id=run_id, ckpt_dir=ckpt_dir, image=image, interval=interval, insecure=insecure, output=output
        )
        return
    from trainops.train.faulted import run_local_supervised  # lazy: loads pydantic

    rid = runid.given_or_new(run_id, "local")
    _say_start(manifest, rid)
    local = _local_options(manifest, ckpt_dir, image, setenv, interval, insecure, output)
    result = run_local_supervised(
        manifest, run_id=rid, options=local, on_push=_announcer(output), on_start=_say_resumed, on_restore=_say_restored
    )
    if output == "json":
        echo_json(result)
    else:
        _say_run(result.run, starts=result.starts, incidents=result.incidents, log=result.log)
    result.raise_for_failure(hint="its output above says why; run again to resume from the newest checkpoint")


def _local_options(
    manifest: Any,
    ckpt_dir: Path | None,
    image: str | None,
    setenv: tuple[str, ...],
    interval: float,
    insecure: bool,
    output: str,
) -> Any:
    from trainops.train.local import LocalRunOptions, pinned_image  # lazy: loads pydantic

    return LocalRunOptions(
        ckpt_dir=ckpt_dir,
        image=pinned_image(manifest, image=image, insecure=insecure) if image else None,
        interval=interval,
        insecure=insecure,
        env_overrides=key_values(setenv, "-e"),
        command_stdout=sys.stderr if output == "json" else None,
    )


def _say_start(manifest: Any, run_id: str) -> None:
    """The run's id as it starts (on stderr, whatever -o): what `drill`, `train status` and
    `train logs` follow it by, and where its output is kept."""
    from trainops.train.target import LocalTarget  # lazy: loads pydantic

    click.echo(
        f"trainops: run {run_id} starts; its output is kept in {LocalTarget(manifest).output_path(run_id)} "
        f"(`trainops train logs {run_id}`, `trainops train status {run_id}`)",
        err=True,
    )


def _say_restored(ref: str | None, note: str) -> None:
    click.echo(f"trainops: restored {ref}" if ref else f"trainops: nothing restored ({note})", err=True)


def _say_resumed(step: int | None, ref: str | None) -> None:
    if ref is not None:
        click.echo(f"trainops: resumed from {ref}" + (f" (step {step})" if step is not None else ""), err=True)


def _say_run(result: Any, *, starts: int, incidents: list[str], log: str) -> None:
    """What a local run did, for people, on stderr (what it started from was said as it started)."""
    if incidents:
        click.echo(f"trainops: {starts} start(s); incidents {', '.join(incidents)} (trainops incidents)", err=True)
    for note in result.watcher_errors:
        click.echo(f"trainops: warning: checkpoint push failed, retried on the next scan: {note}", err=True)
    if result.missing_secret_env:
        names = ", ".join(result.missing_secret_env)
        click.echo(f"trainops: warning: secretEnv {names} not set in this environment", err=True)
    click.echo(
        f"trainops: run {result.run_id} exited {result.exit_code}; "
        f"{len(result.pushed)} checkpoint(s) pushed to {result.repository}; its output: {log}",
        err=True,
    )


def _run_slurm(
    manifest: Any,
    *,
    run_id: str | None,
    ckpt_dir: Path | None,
    image: str | None,
    interval: float,
    insecure: bool,
    output: str,
) -> None:
    from trainops.train.slurm_run import run_slurm  # lazy: loads pydantic

    if not run_id or ckpt_dir is None:
        raise click.UsageError("--slurm needs --run-id and --ckpt-dir (the sbatch script passes them)")

    result = run_slurm(
        manifest,
        run_id=runid.given_or_new(run_id, "run"),
        ckpt_dir=ckpt_dir,
        image=image,
        interval=interval,
        insecure=insecure,
        on_push=_announcer("text"),  # the job's output file keeps a line per push
        command_stdout=sys.stderr if output == "json" else None,
    )
    if output == "json":
        echo_json(result)
        return
    run = result.run
    where = f"restored {run.restored}" if run.restored else f"nothing restored ({run.restore_note})"
    click.echo(f"trainops: run {run.run_id}: {where}", err=True)
    if run.resumed_from:
        click.echo(f"trainops: resumed from {run.resumed_from.ref}", err=True)
    click.echo(
        f"trainops: job {result.job_id} start {result.restart}: {result.action} ({result.reason}); "
        f"{len(run.pushed)} checkpoint(s) pushed to {run.repository}",
        err=True,
    )


@train.command("status")
@manifest_options
@click.argument("run_id", metavar="[RUN]", required=False, shell_complete=options.complete_run)
@kubeconfig_options
@output_option
def status_cmd(
    file: str | None, env: str | None, run_id: str | None, access: ClusterAccess | None, output: str
) -> None:
    """The job of RUN (default: of every run): state, the scheduler's reason, restarts, pods and nodes.

    Slurm targets: the Slurm job of each run submitted from here. Local runs (`train run
    --local`): RUN's ETTR and its parts from its records. Kubernetes targets: the job
    the GitOps controller applied, read from the API server with the kubeconfig (phase, pods,
    nodes, restarts; the PodGroup's or Workload's conditions while it waits).
    """
    from trainops.train.target import target_for  # lazy: loads pydantic

    target = target_for(options.load(file, env), run_id=run_id, access=access, records=True)
    found = target.status(run_id)
    if output == "json":
        echo_json(found[0] if run_id else found)
        return
    if not found:
        click.echo(target.nothing)
        return
    _STATUS_TEXT[type(found[0]).__name__](found, run_id)


def _slurm_status(statuses: list[Any], run_id: str | None) -> None:
    for item in statuses:
        reason = f" ({item.reason})" if item.reason else ""
        click.echo(f"{item.run_id}  job {item.job_id}  {item.state}{reason}  restarts {item.restarts}")
        details = [
            ("blocked", f"{item.unschedulable} (incident {item.incident})" if item.incident else item.unschedulable),
            ("nodes", item.nodes),
            ("exit", item.exit_code),
            ("note", item.comment),
            ("log", item.stdout),
        ]
        for key, value in details:
            if value:
                click.echo(f"  {key:<8}{value}")
        if item.ettr is not None and item.ettr.ettr is not None:
            for key, value in _ettr_lines(item.ettr):
                click.echo(f"  {key:<8}{value}")


def _local_status(runs: list[Any], run_id: str | None) -> None:
    if run_id is None:
        rows = [
            (
                r.run_id,
                clock.display(r.started),
                str(r.ettr.starts),
                "running" if r.ettr.running else (r.outcome or "-"),
                "-" if r.ettr.ettr is None else f"{r.ettr.ettr:.3f}",
                str(len(r.ettr.incidents)),
            )
            for r in runs
        ]
        echo_columns("local runs", ("run", "started", "starts", "state", "ettr", "incidents"), rows)
        return
    (status,) = runs
    state = "running" if status.ettr.running else (status.outcome or "-")
    click.echo(f"{status.run_id}  local  {state}")
    for key, value in _ettr_lines(status.ettr):
        click.echo(f"  {key:<8}{value}")


def _ettr_lines(ettr: Any) -> list[tuple[str, str]]:
    """ETTR and its parts, a line each (train status RUN)."""
    running = " (running)" if ettr.running else ""
    productive, wall = duration_text(ettr.productive_seconds), duration_text(ettr.wall_seconds)
    restarts, recomputed = duration_text(ettr.restart_lost_seconds), duration_text(ettr.recompute_lost_seconds)
    saves = duration_text(ettr.checkpoint_save_seconds)
    lines = [
        ("ettr", f"{ettr.ettr:.3f}: productive {productive} of {wall} wall-clock, {ettr.starts} start(s){running}"),
        ("lost", f"restarts {restarts}, recomputed steps {recomputed}; checkpoint saves {saves} ({ettr.checkpoints})"),
    ]
    if ettr.incidents:
        mttr, mtbf = duration_text(ettr.mttr_seconds), duration_text(ettr.mtbf_seconds)
        lines.append(("mttr", f"{mttr} over {len(ettr.incidents)} incident(s); MTBF {mtbf}"))
        if ettr.mttr_phases is not None:
            lines.append(("phases", f"median: {phases_text(ettr.mttr_phases)}"))
        for row in ettr.incidents:
            if row.phases is not None:
                head = f"{row.id} ({row.fault}, mttr {duration_text(row.mttr_seconds)})"
                lines.append(("phases", f"{head}: {phases_text(row.phases)}"))
    if ettr.advised_interval_seconds is not None:
        advised = duration_text(ettr.advised_interval_seconds)
        lines.append(("advice", f"checkpoint every {advised} (Young/Daly: sqrt(2 x MTBF x save time))"))
    return lines


def _kube_status(states: list[Any], run_id: str | None) -> None:
    for state in states:
        click.echo(
            f"{state.run_id}  {state.kind.rsplit(' ', 1)[-1]} {state.namespace}/{state.name}  "
            f"{state.phase}  restarts {state.restarts}"
        )
        if state.reason:
            click.echo(f"  reason {state.reason}")
        if state.blocked:
            click.echo(f"  blocked {state.blocked}")
        for pod in state.pods:
            why = f" ({pod.reason})" if pod.reason else ""
            click.echo(f"  pod    {pod.name}  {pod.phase}{why}  node {pod.node or '-'}  restarts {pod.restarts}")


@train.command("logs")
@manifest_options
@click.argument("run_id", metavar="RUN", shell_complete=options.complete_run)
@kubeconfig_options
def logs_cmd(file: str | None, env: str | None, run_id: str, access: ClusterAccess | None) -> None:
    """Print the output of RUN: a local run's (kept by its supervisor), its Slurm job's file,
    or its pods' logs from the API server."""
    from trainops.train.target import target_for  # lazy: loads pydantic

    target = target_for(options.load(file, env), run_id=run_id, access=access)
    for part in target.logs(run_id):
        if part.source is not None:
            click.echo(f"==> {part.source} <==", err=True)
        if part.text:
            click.echo(part.text, nl=part.source is not None and not part.text.endswith("\n"))
        elif part.missing:
            click.echo(part.missing, err=True)


@train.command("cancel")
@manifest_options
@click.argument("run_id", metavar="RUN", shell_complete=options.complete_run)
@output_option
def cancel_cmd(file: str | None, env: str | None, run_id: str, output: str) -> None:
    """Cancel RUN: scancel its Slurm job, or commit its job's removal from the GitOps path.

    Either way the trainer gets SIGTERM (it saves, the last checkpoint is pushed). On
    Kubernetes the commit carries `Trainops-Action: cancel`; the GitOps controller prunes the job.
    """
    from trainops.train.target import target_for  # lazy: loads pydantic

    target = target_for(options.load(file, env), run_id=run_id)
    cancelled: Any = target.cancel(run_id)
    if output == "json":
        echo_json(cancelled)
    elif type(cancelled).__name__ == "CancelResult":  # a GitOps commit
        click.echo(
            f"committed {str(cancelled.commit)[:12]} to {cancelled.repo} {cancelled.branch}:{cancelled.path}: "
            f"run {run_id} removed ({', '.join(cancelled.removed)})"
        )
    else:  # a job cancelled by its scheduler
        click.echo(f"cancelled job {cancelled.job_id} of run {cancelled.run_id} (now {cancelled.state})")


@train.command("watch")
@manifest_options
@click.argument("run_id", metavar="RUN", shell_complete=options.complete_run)
@kubeconfig_options
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between two looks.")
@click.option("--timeout", type=float, default=None, help="Stop after this many seconds (default: when RUN ends).")
@click.option(
    "--prune-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="How long a restart waits for the GitOps controller to prune the job.",
)
@click.option("--once", is_flag=True, help="Look once, act on what is found, and exit.")
@options.insecure_option
@output_option
def watch_cmd(
    file: str | None,
    env: str | None,
    run_id: str,
    access: ClusterAccess | None,
    interval: float,
    timeout: float | None,
    prune_timeout: float,
    once: bool,
    insecure: bool,
    output: str,
) -> None:
    """Watch a Kubernetes RUN's nodes; on a node fault, act and record the incident.

    Reads the run's pods and their Nodes with the kubeconfig: a node gone or not Ready, a
    node condition or Warning event carrying an Xid or DCGM failure. The manifest's table
    (`trainops incidents classes`) decides: restart (the job's own policy restarts it),
    requeue (the job restarts away from the node through two git commits: removed, then
    back with the node excluded), drain (as requeue, and the node is cordoned and tainted
    trainops.dev/fault=CLASS:NoSchedule through the API server: the ONE write trainops makes
    outside git, since a broken GPU must take no work before the next sync), stop (the run is
    cancelled through git). Each incident is recorded in the registry (`trainops incidents`).
    """
    from trainops.train.target import WatchOptions, target_for  # lazy: loads pydantic

    target = target_for(options.load(file, env), run_id=run_id, access=access)

    def watching(state: Any, nodes: list[str]) -> None:
        click.echo(f"trainops: watching run {run_id} ({state.phase}) on {', '.join(nodes) or 'no node yet'}", err=True)

    report = target.watch(run_id, WatchOptions(interval, timeout, prune_timeout, once, insecure), watching)
    if output == "json":
        echo_json(report)
        return
    for incident in report.incidents:
        recovered = f"; recovered {clock.display(incident.recovered)}" if incident.recovered else ""
        click.echo(f"incident {incident.id}  {incident.fault} on {incident.node}  {incident.action}{recovered}")
        click.echo(f"  {incident.action_note}")
    phase = report.phase or "not on the cluster"
    click.echo(f"run {run_id}: {phase} after {report.checks} look(s), {len(report.incidents)} incident(s)")


# `train status` text by what the target found (its JSON is the result as it is)
_STATUS_TEXT = {"JobStatus": _slurm_status, "LocalRunStatus": _local_status, "RunState": _kube_status}

COMMANDS: list[click.Command] = [train]
