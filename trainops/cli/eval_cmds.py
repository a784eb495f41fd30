"""The `eval` group: evaluate a checkpoint against its gates, list its evaluations, and
render or submit the same evaluation as a Kubernetes Job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from trainops import runid
from trainops.cli import options
from trainops.cli.options import manifest_options, output_option
from trainops.cli.output import command_stdout, echo_columns, echo_folded, echo_json, screen_width
from trainops.clock import display


@click.group("eval")
def eval_group() -> None:
    """Evaluation: run eval.command on a checkpoint, check the gates, push the report."""


def _gate_table(result: Any) -> None:
    echo_folded(f"eval of {result.checkpoint}")
    rows = []
    for gate in result.gates:
        actual = "missing" if gate.actual is None else f"{gate.actual:g}"
        rows.append((gate.metric, f"{gate.op} {gate.value:g}", actual, "pass" if gate.passed else "FAIL"))
    echo_columns("", ("metric", "gate", "actual", "result"), rows)
    others = {k: v for k, v in result.metrics.items() if k not in {g.metric for g in result.gates}}
    if others:
        echo_folded("other metrics: " + ", ".join(f"{k}={v:g}" for k, v in sorted(others.items())))
    verdict = "passed" if result.passed else "FAILED"
    echo_folded(f"{verdict}; report {result.report}")


@eval_group.command("run")
@click.argument("checkpoint", required=False, metavar="[CKPT]", shell_complete=options.complete_reference)
@manifest_options
@click.option("--image", metavar="REF", default=None, help="Image this runs in (recorded); default $TRAINOPS_IMAGE.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Run eval.command here (default: the manifest's directory).",
)
@click.option(
    "--from",
    "local_copy",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A local copy of the checkpoint, used when every file's digest matches (else it is pulled).",
)
@options.insecure_option
@output_option
def run_cmd(
    checkpoint: str | None,
    file: str | None,
    env: str | None,
    image: str | None,
    workdir: Path | None,
    local_copy: Path | None,
    insecure: bool,
    output: str,
) -> None:
    """Evaluate CKPT (default: eval.checkpoint — latest, best or a reference) with
    eval.command, check eval.gates and push the report beside the checkpoint.

    Exits 8 when a gate fails (the report is pushed, verdict failed), 9 when the command
    crashes, times out or writes anything but one JSON object of numbers (nothing pushed).
    """
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.eval import require_passed, run_eval  # lazy: loads pydantic
    from trainops.registry.context import Registries  # lazy: `trainops --help` loads no trainops.registry

    manifest = options.load(file, env)
    with (
        Registries.for_manifest(manifest, insecure=insecure) as registries,
        transfer_progress(output == "text") as progress,
    ):
        result = run_eval(
            manifest=manifest,
            checkpoint=checkpoint,
            registries=registries,
            image=image,
            workdir=workdir,
            local_copy=local_copy,
            command_stdout=command_stdout(output),
            progress=progress,
        )
    if output == "json":
        echo_json(result)
    else:
        _gate_table(result)
    sys.stdout.flush()
    require_passed(result)


@eval_group.command("ls")
@click.argument("checkpoint", required=False, metavar="[CKPT]", shell_complete=options.complete_reference)
@manifest_options
@options.insecure_option
@output_option
@options.wide_option
def ls_cmd(checkpoint: str | None, file: str | None, env: str | None, insecure: bool, output: str, wide: bool) -> None:
    """List the evaluations of CKPT (default: eval.checkpoint), oldest first."""
    from trainops.eval import list_evals  # lazy: loads pydantic
    from trainops.eval.run import eval_spec  # lazy: loads pydantic
    from trainops.eval.select import resolve_checkpoint  # lazy: loads pydantic
    from trainops.registry.context import Registries  # lazy: `trainops --help` loads no trainops.registry

    manifest = options.load(file, env)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        which = checkpoint or eval_spec(manifest).checkpoint
        found = resolve_checkpoint(registries, manifest=manifest, which=which)
        entries = list_evals(registries, checkpoint=found.ref)
    if output == "json":
        echo_json(entries)
        return
    if not entries:
        click.echo(f"no evaluation of {found.ref}")
        return

    echo_folded(f"evaluations of {found.ref}", wide=wide)
    rows = []
    for e in entries:
        metrics = (", " if wide else "\n").join(f"{k}={v:.4g}" for k, v in sorted(e.report.metrics.items()))
        verdict = "passed" if e.report.passed else "FAILED"
        rows.append((display(e.report.ended), verdict, metrics, e.digest if wide else e.digest[:19]))
    echo_columns("", ("ended", "verdict", "metrics", "report"), rows, width=None if wide else screen_width())


_image_option = options.image_option(
    "Image of the Job (name@sha256:…, or a tag resolved now); default: eval.image, else the training image."
)
_run_id_option = options.run_id_option("Eval id in object names (default: new).")


@eval_group.command("render")
@click.argument("checkpoint", required=False, metavar="[CKPT]", shell_complete=options.complete_reference)
@manifest_options
@_image_option
@_run_id_option
@options.insecure_option
@output_option
def render_cmd(
    checkpoint: str | None,
    file: str | None,
    env: str | None,
    image: str | None,
    run_id: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Print the eval of CKPT as a Kubernetes Job (Volcano when train.scheduler is volcano)
    running `trainops eval run` in the image; the checkpoint is pinned by digest."""
    from trainops.eval.cluster import render_eval  # lazy: loads pydantic
    from trainops.registry.context import Registries  # lazy: `trainops --help` loads no trainops.registry

    manifest = options.load(file, env)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        made = render_eval(
            manifest=manifest,
            registries=registries,
            checkpoint=checkpoint,
            run_id=runid.given_or_new(run_id, "eval"),
            image=image,
        )
    for warning in made.rendered.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output == "json":
        echo_json(made)
        return
    click.echo(made.text(), nl=False)


@eval_group.command("submit")
@click.argument("checkpoint", required=False, metavar="[CKPT]", shell_complete=options.complete_reference)
@manifest_options
@_image_option
@_run_id_option
@options.insecure_option
@output_option
def submit_cmd(
    checkpoint: str | None,
    file: str | None,
    env: str | None,
    image: str | None,
    run_id: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Commit the eval Job of CKPT to <spec.gitops.path>-eval in the GitOps repository."""
    from trainops.eval.cluster import submit_eval  # lazy: loads pydantic
    from trainops.registry.context import Registries  # lazy: `trainops --help` loads no trainops.registry

    manifest = options.load(file, env)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        result = submit_eval(
            manifest=manifest,
            registries=registries,
            checkpoint=checkpoint,
            run_id=runid.given_or_new(run_id, "eval"),
            image=image,
        )
    if output == "json":
        echo_json(result)
    elif not result.changed:
        click.echo(f"{result.repo} {result.branch}:{result.path} already holds this eval; nothing committed")
    else:
        click.echo(f"committed {str(result.commit)[:12]} to {result.repo} {result.branch}:{result.path}")
        click.echo(f"  eval {result.run_id} of {result.checkpoint}")


COMMANDS: list[click.Command] = [eval_group]
