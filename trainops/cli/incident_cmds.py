"""`trainops incidents` (ls, show, classes) and `trainops drill`: the failures of runs, the
diagnosis → action table, and fault injection into a running run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from trainops import clock
from trainops.cli import options
from trainops.cli.options import manifest_options, output_option
from trainops.cli.output import duration_text, echo_columns, echo_json, phases_text, screen_width

if TYPE_CHECKING:
    from trainops.faults.actions import ClassRow


@click.group()
def incidents() -> None:
    """Failures of training runs: what was seen, what was done, how the run came back."""


@incidents.command("ls")
@manifest_options
@click.argument("run_id", metavar="[RUN]", required=False, shell_complete=options.complete_run)
@options.insecure_option
@output_option
def ls_cmd(file: str | None, env: str | None, run_id: str | None, insecure: bool, output: str) -> None:
    """The incidents of RUN (default: of every run), oldest first, and the count per node."""
    from trainops.faults.query import list_incidents  # lazy: loads pydantic

    result = list_incidents(options.load(file, env), run_id=run_id, insecure=insecure)
    if output == "json":
        echo_json(result)
        return
    if not result.incidents:
        click.echo("no incidents" + (f" for run {run_id}" if run_id else ""))
        return
    rows = [
        (i.id, clock.display(i.evidence_at), i.fault, i.node or "-", i.action, duration_text(i.mttr_seconds))
        for i in result.incidents
    ]
    echo_columns("incidents", ("id", "detected", "class", "node", "action", "mttr"), rows)
    click.echo("")
    nodes = [(n.node, str(n.incidents), str(n.in_window), "drain" if n.flagged else "") for n in result.nodes]
    echo_columns("nodes", ("node", "incidents", "in window", "flag"), nodes)


@incidents.command("show")
@manifest_options
@click.argument("incident_id", metavar="ID", shell_complete=options.complete_incident)
@options.insecure_option
@output_option
def show_cmd(file: str | None, env: str | None, incident_id: str, insecure: bool, output: str) -> None:
    """One incident: class, evidence lines, node, action, detection and recovery."""
    from trainops.faults.ettr import phases  # lazy: loads pydantic
    from trainops.faults.query import show_incident  # lazy: loads pydantic

    found = show_incident(options.load(file, env), incident_id=incident_id, insecure=insecure)
    if output == "json":
        echo_json(found)
        return
    rows = [
        ("run", found.run_id + (f" (Slurm job {found.job_id})" if found.job_id else "")),
        ("class", f"{found.fault}: {found.detail}"),
        ("node", (found.node or "-") + (" (flagged: see the action)" if found.node_flagged else "")),
        ("action", found.action_note),
        ("resolves", found.bucket or "-"),
        ("evidence", clock.display(found.evidence_at)),
        ("decided", clock.display(found.detected)),
        ("acted", clock.display(found.acted) or "-"),
        (
            "recovered",
            clock.display(found.recovered) or ("- (the run was stopped)" if found.action == "stop" else "not yet"),
        ),
        ("resumed", f"{found.resumed_from or '-'} (step {found.resumed_step})" if found.recovered else "-"),
        ("lost", f"{found.steps_lost} steps" if found.steps_lost is not None else "-"),
        ("mttr", duration_text(found.mttr_seconds)),
    ]
    if (split := phases(found)) is not None:
        rows.append(("phases", phases_text(split)))
    click.echo(f"incident {found.id}")
    for key, value in rows:
        click.echo(f"  {key:<10}{value}")
    click.echo("  evidence lines:")
    for line in found.evidence:
        click.echo(f"    {line}")


@incidents.command("classes")
@manifest_options
@click.argument("fault", metavar="[CLASS]", required=False)
@output_option
@options.wide_option
def classes_cmd(file: str | None, env: str | None, fault: str | None, output: str, wide: bool) -> None:
    """The fault classes: the action each gets (train.faults.actions over the defaults) and
    what resolves it (restart-app, reset-gpu, drain-service, fix-app: NVIDIA's resolution
    buckets). With CLASS: its Xids with NVIDIA's bucket, the DCGM signals that come before
    it, and the lines it shows in."""
    from trainops.faults.actions import action_table, class_row  # lazy: loads pydantic

    policy = options.load(file, env).require_train().faults
    if fault is not None:
        row = class_row(fault, policy)
        if output == "json":
            echo_json(row)
            return
        _class_text(row)
        return
    rows = action_table(policy)
    if output == "json":
        echo_json(rows)
        return
    lines = [(r.fault, r.action + ("" if r.action == r.default else " *"), r.bucket, r.meaning) for r in rows]
    width = None if wide else screen_width()  # the meaning folds between words
    echo_columns(
        "fault classes (* set in the manifest; `incidents classes CLASS` for one)",
        ("class", "action", "resolution", "meaning"),
        lines,
        width=width,
    )


def _class_text(row: ClassRow) -> None:
    from trainops.faults.catalog import BUCKET_MEANINGS  # lazy: loads pydantic

    click.echo(f"{row.fault}: {row.meaning}")
    click.echo(f"  action      {row.action}" + ("" if row.action == row.default else f" (default {row.default})"))
    click.echo(f"  resolution  {row.bucket}: {BUCKET_MEANINGS[row.bucket]}")
    for entry in row.xids:
        sure = "" if entry.certain else "; recalled, check the driver's catalog"
        click.echo(f"  Xid {entry.xid:<7} {entry.meaning}")
        click.echo(f"              NVIDIA: {entry.nvidia} → {entry.bucket}{sure}")
    for key, values in (("DCGM health", row.health), ("DCGM fields", row.counters), ("lines", row.lines)):
        for i, value in enumerate(values):
            click.echo(f"  {key if i == 0 else '':<11} {value}")


@incidents.command("report")
@manifest_options
@click.argument("run_id", metavar="RUN", shell_complete=options.complete_run)
@options.insecure_option
@output_option
def report_cmd(file: str | None, env: str | None, run_id: str, insecure: bool, output: str) -> None:
    """RUN's post-incident report: each incident's signal, diagnosis, action and recovery,
    with the evidence, the time of each and the seconds between, and the run's ETTR."""
    from trainops.faults.query import run_report  # lazy: loads pydantic

    report = run_report(options.load(file, env), run_id=run_id, insecure=insecure)
    if output == "json":
        echo_json(report)
        return
    ettr = report.ettr
    figure = f"ETTR {ettr.ettr:.3f}" if ettr.ettr is not None else "ETTR -"
    click.echo(
        f"run {report.run_id} ({report.pipeline}): {report.starts} start(s), {len(report.incidents)} incident(s), "
        f"{figure}, MTTR {duration_text(ettr.mttr_seconds)}"
    )
    for item in report.incidents:
        where = f" on {item.node}" if item.node else ""
        click.echo(f"\n{item.id}  {item.fault}{where} → {item.action}  (resolves: {item.bucket})")
        for phase in item.phases:
            after = f" (+{duration_text(phase.seconds)})" if phase.seconds else ""
            click.echo(f"  {phase.phase:<10}{clock.display(phase.at) or '-'}{after}")
            click.echo(f"    {phase.text}")
            for line in phase.evidence[1:]:
                click.echo(f"    {line}")
        if item.mttr_phases is not None:
            click.echo(f"  {'mttr':<10}{duration_text(item.mttr_seconds)}: {phases_text(item.mttr_phases)}")


@incidents.command("dcgm-counters")
@output_option
def dcgm_counters_cmd(output: str) -> None:
    """dcgm-exporter's counters file, with the DCGM fields that come before GPU failures.

    dcgm-exporter's default file leaves the ECC, retired-page, row-remap-pending, NVLink
    error and throttle fields off; this one keeps its defaults and turns those on. Give it
    to dcgm-exporter with `-f FILE` (or the Helm chart's counters ConfigMap):
    `trainops incidents dcgm-counters > counters.csv`. With -o json: each field, whether
    dcgm-exporter's defaults have it, and the fault classes its rise comes before.
    """
    from trainops.faults.catalog import counters, counters_csv  # lazy: loads pydantic

    if output == "json":
        echo_json(counters())
        return
    click.echo(counters_csv(), nl=False)


@click.command("drill")
@manifest_options
@click.argument(
    "drill", metavar="FAULT", type=click.Choice(["hang", "nccl-timeout", "cuda-oom", "xid", "node-lost", "slow-node"])
)
@click.argument("run_id", metavar="RUN", shell_complete=options.complete_run)
@click.option("--node", metavar="NODE", default=None, help="Only the trainer processes on this Slurm node.")
@click.option("--xid", type=int, default=79, show_default=True, help="The Xid of the xid drill.")
@click.option("--rank", type=click.IntRange(min=0), default=1, show_default=True, help="The rank slow-node throttles.")
@click.option(
    "--duty", type=float, default=0.5, show_default=True, help="slow-node: the share of the time the rank is stopped."
)
@click.option("--seconds", type=float, default=60.0, show_default=True, help="slow-node: how long it throttles.")
@output_option
def drill_cmd(
    file: str | None,
    env: str | None,
    drill: str,
    run_id: str,
    node: str | None,
    xid: int,
    rank: int,
    duty: float,
    seconds: float,
    output: str,
) -> None:
    """Inject FAULT into RUN's trainer on this machine, to rehearse detection and recovery.

    hang stops the trainer (SIGSTOP); nccl-timeout and cuda-oom write PyTorch's line to its
    stderr; xid appends an NVRM Xid message to the node-health file; node-lost kills every
    trainer process (SIGKILL); slow-node throttles one rank (--rank, RANK in its environment)
    with a duty cycle of SIGSTOP and SIGCONT (--duty of every half second, for --seconds),
    returning when done. On a cluster, run it on the node: `srun --jobid=JOB --overlap -w
    NODE trainops drill …`.
    """
    from trainops.faults.drill import Throttle, inject  # lazy: loads pydantic

    result = inject(
        options.load(file, env),
        run_id=run_id,
        drill=drill,
        node=node,
        xid=xid,
        throttle=Throttle(rank=rank, duty=duty, seconds=seconds),
    )
    if output == "json":
        echo_json(result)
        return
    click.echo(f"drill {result.drill} on run {result.run_id}: {result.evidence}")


COMMANDS: list[click.Command] = [incidents, drill_cmd]
