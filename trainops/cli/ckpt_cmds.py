"""`trainops ckpt`: watch a training directory and push checkpoints; ls, latest, pull, prune.

Defaults come from the environment a pod gets (TRAINOPS_CKPT_REPOSITORY, TRAINOPS_RUN_ID,
TRAINOPS_IMAGE_DIGEST, TRAINOPS_NODE_RANK) and from trainops.yaml's train.checkpoint.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops import podenv
from trainops.cli import options
from trainops.cli.options import output_option, wide_option
from trainops.cli.output import echo_columns, echo_json
from trainops.clock import display
from trainops.errors import NotFoundError, RemoteError, UsageError
from trainops.podenv import PodEnvironment
from trainops.units import format_size as _size

if TYPE_CHECKING:
    from trainops.checkpoint.catalog import CheckpointInfo

LAYOUTS = ("auto", "trainops", "huggingface", "megatron", "deepspeed", "dcp")  # = trainops.checkpoint.LAYOUT_NAMES
REPOSITORY_ENV = podenv.CKPT_REPOSITORY
RUN_ID_ENV = podenv.RUN_ID
IMAGE_DIGEST_ENV = podenv.IMAGE_DIGEST
NODE_RANK_ENV = podenv.NODE_RANK


def _repository(opened: Any, given: str | None, given_as: str = "REPO") -> Any:
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures

    return checkpoint_repository(opened.registries, manifest=opened.manifest, given=given, given_as=given_as)


def _policy(opened: Any) -> Any:
    """train.checkpoint of the manifest, or None."""
    train = opened.manifest.pipeline.spec.train if opened.manifest is not None else None
    return train.checkpoint if train is not None else None


def _retention_options(func: Any) -> Any:
    func = click.option("--mode", type=click.Choice(["min", "max"]), default=None, help="Lower or higher is better.")(
        func
    )
    func = click.option("--metric", default=None, metavar="NAME", help="Metric that ranks checkpoints (val_loss).")(
        func
    )
    func = click.option(
        "--keep-best", type=click.IntRange(0), default=None, metavar="K", help="Also keep the best K by --metric."
    )(func)
    func = click.option(
        "--keep-last", type=click.IntRange(1), default=None, metavar="N", help="Keep the newest N checkpoints."
    )(func)
    return func


def _metrics_text(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in sorted(metrics.items()))


def _until_options(func: Any) -> Any:
    """--once, --until-signal, --until-pid: when the watcher stops."""
    until_pid = click.option(
        "--until-pid", type=click.IntRange(1), default=None, metavar="PID", help="Run until process PID exits."
    )
    until_signal = click.option(
        "--until-signal", "scan_mode", flag_value="signal", help="Run until SIGTERM/SIGINT, then scan a last time."
    )
    once = click.option("--once", "scan_mode", flag_value="once", help="Scan once and exit.")
    return once(until_signal(until_pid(func)))


def _timing_options(func: Any) -> Any:
    """--interval, --settle, --drain: how often the watcher scans and how long it waits."""
    func = click.option(
        "--drain",
        default="0s",
        show_default=True,
        help="After stopping, keep scanning this long while a write is under way.",
    )(func)
    func = click.option(
        "--settle", default="5s", show_default=True, help="Quiet time before a marker-less checkpoint counts."
    )(func)
    return click.option("--interval", default="10s", show_default=True, help="Time between scans.")(func)


@click.group()
def ckpt() -> None:
    """Checkpoints: watch a training directory and push each complete one; ls, latest, pull, prune."""


# -- watch ---------------------------------------------------------------------------------

_metrics_option = click.option(
    "--metrics-address",
    default=None,
    metavar="HOST:PORT",
    help="Serve the run's Prometheus metrics (/metrics) from the checkpoints pushed: step, loss, checkpoint age "
    "(a training pod's port `metrics`, which its PodMonitor scrapes).",
)


@ckpt.command("watch")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--repository", "repository", default=None, metavar="REPO", help=f"Where to push [env {REPOSITORY_ENV}].")
@click.option("--run-id", default=None, help=f"Run id recorded in each checkpoint's lineage [env {RUN_ID_ENV}].")
@click.option("--layout", type=click.Choice(LAYOUTS), default=None, help="Checkpoint layout (default: auto).")
@options.dedup_option(
    "chunks: push in the chunked form, sending only new chunks (default: train.checkpoint.dedup, else off).",
    default=None,
)
@_retention_options
@_timing_options
@click.option("--image-digest", default=None, metavar="SHA256", help=f"Training image digest [env {IMAGE_DIGEST_ENV}].")
@_until_options
@click.option("--leader-only", is_flag=True, help=f"Push nothing unless {NODE_RANK_ENV} is unset or 0.")
@_metrics_option
@options.registry_options
@output_option
def watch(
    directory: Path,
    repository: str | None,
    run_id: str | None,
    layout: str | None,
    dedup: str | None,
    keep_last: int | None,
    keep_best: int | None,
    metric: str | None,
    mode: str | None,
    interval: str,
    settle: str,
    drain: str,
    image_digest: str | None,
    scan_mode: str | None,
    until_pid: int | None,
    leader_only: bool,
    metrics_address: str | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Push every complete checkpoint written to DIRECTORY, with lineage; apply retention.

    Prints one line per checkpoint pushed. Without --once it runs until SIGTERM/SIGINT
    (or until --until-pid's process exits), then scans a last time and exits 0.
    """
    from trainops.manifest.common import parse_seconds  # lazy: loads pydantic
    from trainops.supervise import idle_until, stop_when  # lazy: loads subprocess

    if until_pid is not None and scan_mode is not None:
        raise UsageError("--until-pid cannot be combined with --once or --until-signal")
    stop = threading.Event()
    once = scan_mode == "once"
    pod = PodEnvironment.read()
    timing = tuple(parse_seconds(v, what=f"--{k}") for k, v in (("interval", interval), ("settle", settle),
                                                                 ("drain", drain)))  # fmt: skip
    idle = leader_only and not pod.leader
    with stop_when(stop, signals=not once, until_pid=until_pid), _serving(metrics_address, pod, run_id, idle) as fed:
        if idle:
            click.echo(f"node rank {pod.node_rank} is not the leader: pushing nothing", err=True)
            if not once:
                idle_until(stop)  # the leader's sidecar does the work; this one ends with the pod
            return
        _watch(
            directory,
            repository=repository,
            run_id=run_id,
            layout=layout,
            dedup=dedup,
            keep={"last": keep_last, "best": keep_best, "metric": metric, "mode": mode},
            timing=(timing[0], timing[1], timing[2]),
            image_digest=image_digest,
            once=once,
            stop=stop,
            context=(file, env, insecure),
            output=output,
            metrics=fed,
        )


@contextlib.contextmanager
def _serving(address: str | None, pod: podenv.PodEnvironment, run_id: str | None, idle: bool) -> Iterator[Any]:
    """--metrics-address: the run's metrics while the watcher runs (an idle one serves no series)."""
    from trainops.slo.exporter import NoSeries, TrainingMetrics, serve_metrics  # lazy: loads ssl, socketserver

    metrics = TrainingMetrics(pipeline=pod.pipeline or "", run_id=run_id or pod.run_id or "")
    server = serve_metrics(NoSeries() if idle else metrics, address)
    try:
        yield metrics if server is not None else None
    finally:
        if server is not None:
            server.close()


def _watch(
    directory: Path,
    *,
    repository: str | None,
    run_id: str | None,
    layout: str | None,
    dedup: str | None,
    keep: dict[str, Any],
    timing: tuple[float, float, float],
    image_digest: str | None,
    once: bool,
    stop: threading.Event,
    context: tuple[str | None, str | None, bool],
    output: str,
    metrics: Any = None,
) -> None:
    from trainops.checkpoint import WatchConfig, Watcher  # lazy: loads pydantic
    from trainops.checkpoint.retention import retention_override  # lazy: loads pydantic
    from trainops.checkpoint.watch import sidecar_image, sidecar_lineage  # lazy: loads pydantic
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.signing.attest import checkpoint_attester  # lazy: loads pydantic

    pod = PodEnvironment.read()
    run_id = run_id or pod.run_id
    if not run_id:
        raise UsageError("no run id given", hint=f"pass --run-id or set {RUN_ID_ENV}")
    with options.opened(*context) as ctx:
        policy = _policy(ctx)
        config = WatchConfig(
            directory=directory,
            repository=_repository(ctx, repository, "--repository"),
            run_id=run_id,
            layout=layout or (policy.layout if policy is not None else "auto"),
            keep=retention_override(policy.keep if policy is not None else None, **keep),
            lineage=sidecar_lineage(ctx.manifest, pod, image_digest),
            image=sidecar_image(ctx.registries, pod),
            interval=timing[0],
            settle=timing[1],
            drain=timing[2],
            dedup=dedup or (policy.dedup if policy is not None else "off"),
        )
        config.attest = checkpoint_attester(ctx.manifest, ctx.registries)
        with transfer_progress(once and output == "text") as progress:
            watcher = Watcher(ctx.registries, config, progress=progress if once else None,
                              on_event=_printer(output, metrics, directory))  # fmt: skip
            if once:
                if not directory.is_dir():  # a running watcher waits for the trainer to create it
                    raise NotFoundError(f"{directory} is not a directory", hint="pass the checkpoint directory")
                watcher.scan(final=True)
                return
            result = watcher.run(stop)
    if result.final_error:
        raise RemoteError(
            f"the last scan failed: {result.final_error}",
            hint=f"checkpoints not pushed are still in {directory}; `trainops ckpt watch {directory} --once` retries",
        )


def _printer(output: str, metrics: Any = None, directory: Path | None = None) -> Callable[[Any], None]:
    def show(event: Any) -> None:
        if metrics is not None and directory is not None and event.kind == "pushed" and event.checkpoint is not None:
            from trainops.slo.exporter import checkpoint_pushed  # lazy: loads ssl, socketserver

            checkpoint_pushed(metrics, directory, name=event.checkpoint.name, step=event.checkpoint.step)
        if output == "json":
            from trainops.serialize import dumps  # lazy: `trainops --help` loads no trainops.serialize

            click.echo(dumps(event, indent=None), err=event.kind in ("error", "skipped"))
            return
        if event.kind == "pushed" and event.checkpoint is not None:
            c = event.checkpoint
            parent = f", {c.parent.relation} {c.parent.ref}" if c.parent else ""
            click.echo(f"pushed {c.name} (step {c.step}{parent}) → {c.ref} ({_size(c.bytes_sent)} sent)")
        elif event.kind in ("adopted", "removed", "kept"):
            click.echo(f"{event.kind} {event.message}" if event.kind != "adopted" else event.message)
        else:
            click.echo(f"{'warning' if event.kind == 'error' else 'note'}: {event.message}", err=True)

    return show


# -- ls, latest, pull, prune -----------------------------------------------------------------


@ckpt.command("ls")
@click.argument("repo", required=False)
@options.registry_options
@output_option
@wide_option
def ls(repo: str | None, file: str | None, env: str | None, insecure: bool, output: str, wide: bool) -> None:
    """List the checkpoints of REPO by step: tag, step, metrics, created, digest (--wide: run too)."""
    from trainops.checkpoint import list_checkpoints  # lazy: loads concurrent.futures

    with options.opened(file, env, insecure) as ctx:
        repository = _repository(ctx, repo)
        infos = list_checkpoints(ctx.registries, repository=repository, must_exist=True)
    if output == "json":
        echo_json(infos)
        return
    if not infos:
        click.echo(f"no checkpoint in {repository.repo_url}")
        return

    narrow = ("tag", "metrics", "created", "digest")
    columns = ("tag", "step", "run", "metrics", "created", "digest") if wide else narrow
    echo_columns(repository.repo_url, columns, [_ckpt_row(i, wide=wide) for i in infos])


def _ckpt_row(i: CheckpointInfo, *, wide: bool) -> tuple[str, ...]:
    """One row; narrow: metrics one per line and the time to the minute, so 80 columns hold it."""

    if wide:
        step = "" if i.step is None else str(i.step)
        return (i.tag, step, i.run_id or "", _metrics_text(i.metrics), display(i.created), i.digest)
    return (i.tag, _metrics_text(i.metrics).replace(" ", "\n"), display(i.created), i.digest[:19])


@ckpt.command("latest")
@click.argument("repo", required=False)
@options.registry_options
@output_option
def latest(repo: str | None, file: str | None, env: str | None, insecure: bool, output: str) -> None:
    """Print the newest checkpoint of REPO (by step) as a pinned reference."""
    from trainops.checkpoint import latest_checkpoint  # lazy: loads concurrent.futures

    with options.opened(file, env, insecure) as ctx:
        repository = _repository(ctx, repo)
        info = latest_checkpoint(ctx.registries, repository=repository)
    if info is None:
        raise NotFoundError(f"no checkpoint in {repository.repo_url}", hint="`trainops ckpt watch` pushes them")
    if output == "json":
        echo_json(info)
    else:
        click.echo(info.ref)


@ckpt.command("pull")
@click.argument("args", nargs=-1, metavar="REF DEST | --latest [REPO] DEST")
@click.option("--latest", "latest_", is_flag=True, help="Pull the newest checkpoint of REPO.")
@click.option("--layout", type=click.Choice(LAYOUTS), default=None, help="Checkpoint layout of DEST (default: auto).")
@click.option(
    "--rank",
    type=click.IntRange(0),
    default=None,
    metavar="R",
    help="Pull only the files rank R reads (and shared ones).",
)
@click.option(
    "--node-rank",
    default=None,
    metavar="N|auto[+K]",
    help="Pull only the files of node N's ranks (--nproc-per-node of them); auto: the scheduler's "
    f"({', '.join(podenv.NODE_RANK_SOURCES)}; +K: plus K, for workers indexed after the leader), else every file.",
)
@click.option("--nproc-per-node", type=click.IntRange(1), default=None, metavar="P", help="Ranks per node (default 1).")
@click.option("--world-size", type=click.IntRange(1), default=None, metavar="W", help="The job's number of ranks.")
@options.registry_options
@output_option
def pull(
    args: tuple[str, ...],
    latest_: bool,
    layout: str | None,
    rank: int | None,
    node_rank: str | None,
    nproc_per_node: int | None,
    world_size: int | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Restore a checkpoint into DEST for training to resume; nothing is pulled when DEST
    already holds one at least as new (Megatron's tracker and DeepSpeed's latest are written).

    With --rank (or --node-rank) and --world-size, only that rank's shards and the shared
    files are pulled (Megatron's mp_rank_*, DeepSpeed's per-rank files, DCP's __R_*.distcp by
    its .metadata); files DEST already holds with the same digests are not downloaded again."""
    from trainops.checkpoint import restore_latest, restore_ref  # lazy: loads tempfile, sqlite3
    from trainops.checkpoint.shards import requested  # lazy: `trainops --help` loads no trainops.checkpoint
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress

    ranks = requested(rank=rank, node_rank=node_rank, nproc_per_node=nproc_per_node, world_size=world_size)
    if ranks is None and node_rank is not None:  # auto, and the environment names no node
        click.echo("note: no node rank in the environment: pulling every file", err=True)
    if latest_ and len(args) not in (1, 2):
        raise UsageError("usage: trainops ckpt pull --latest [REPO] DEST")
    if not latest_ and len(args) != 2:
        raise UsageError("usage: trainops ckpt pull REF DEST (or --latest [REPO] DEST)")
    dest = Path(args[-1])
    with options.opened(file, env, insecure) as ctx, transfer_progress(output == "text") as progress:
        policy = _policy(ctx)
        chosen = layout or (policy.layout if policy is not None else "auto")
        if latest_:
            repository = _repository(ctx, args[0] if len(args) == 2 else None)
            result = restore_latest(
                ctx.registries, repository=repository, directory=dest, layout=chosen, progress=progress, ranks=ranks
            )
        else:
            ref = ctx.registries.ref(args[0])
            if not ref.tag and not ref.digest:
                raise UsageError(f"{args[0]} names no checkpoint", hint="write REPO:step-N, or use --latest REPO")
            result = restore_ref(ctx.registries, ref=ref, directory=dest, layout=chosen, progress=progress, ranks=ranks)
    if output == "json":
        echo_json(result)
    else:
        click.echo(result.reason)


@ckpt.command("prune")
@click.argument("repo", required=False)
@_retention_options
@click.option("--protect", multiple=True, metavar="TAG", help="A tag (or digest) never to remove (repeatable).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@options.registry_options
@output_option
def prune(
    repo: str | None,
    keep_last: int | None,
    keep_best: int | None,
    metric: str | None,
    mode: str | None,
    protect: tuple[str, ...],
    dry_run: bool,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Apply retention to REPO: keep the newest N and the best K by a metric, remove the
    other step-N checkpoints (defaults: train.checkpoint.keep of trainops.yaml)."""
    from trainops.checkpoint.retention import apply_retention, retention_override  # lazy: loads pydantic

    with options.opened(file, env, insecure) as ctx:
        repository = _repository(ctx, repo)
        policy = _policy(ctx)
        base = policy.keep if policy is not None else None
        keep = retention_override(base, last=keep_last, best=keep_best, metric=metric, mode=mode)
        if keep is None:
            raise UsageError("no retention policy", hint="pass --keep-last N (and --keep-best K --metric M)")
        result = apply_retention(ctx.registries, repository=repository, keep=keep, protect=protect, dry_run=dry_run)
    if output == "json":
        echo_json(result)
        return
    verb = "would remove" if dry_run else "removed"
    for tag in result.removed:
        click.echo(f"{verb} {repository.with_tag(tag)}")
    for kept in result.kept:
        click.echo(f"kept {kept.artifact}: {kept.reason}")
    click.echo(f"{verb} {len(result.removed)} checkpoint(s) from {repository.repo_url}")


COMMANDS = [ckpt]
