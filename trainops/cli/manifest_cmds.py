"""Commands that read a manifest: validate, plan, schema."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli.output import console, echo_json, manifest_options, output_option


@click.command()
@manifest_options
@output_option
def validate(file: str, env: str | None, output: str) -> None:
    """Check trainops.yaml and every environment overlay; report all problems at once."""
    from trainops.errors import ManifestError
    from trainops.spec import check_manifest

    report = check_manifest(Path(file), env=env)
    if output == "json":
        echo_json(
            {
                "file": file,
                "ok": report.ok,
                "environments": report.environments,
                "problems": [p.as_dict() for p in report.problems],
            }
        )
        if not report.ok:
            raise click.exceptions.Exit(ManifestError.exit_code)
        return
    if not report.ok:
        raise ManifestError(report.problems)
    checked = f"; environments checked: {', '.join(report.environments)}" if report.environments else ""
    click.echo(f"{file} is valid{checked}")


@click.command()
@manifest_options
@output_option
def plan(file: str, env: str | None, output: str) -> None:
    """Show the stages the manifest defines, what each consumes and produces, and where it runs."""
    from trainops.pipeline.plan import plan_pipeline
    from trainops.spec import load_manifest

    result = plan_pipeline(manifest=load_manifest(Path(file), env=env))
    if output == "json":
        echo_json(result.as_dict())
        return
    from rich.table import Table

    title = f"{result.pipeline}" + (f" (env {result.env})" if result.env else "")
    table = Table(title=title, show_lines=True)
    for column in ("stage", "consumes", "produces", "runs on"):
        table.add_column(column, overflow="fold")
    for stage in result.stages:
        table.add_row(stage.name, "\n".join(stage.consumes), "\n".join(stage.produces), stage.runs_on)
    out = console()
    out.print(table)
    out.print(f"registry: {result.registry}\ngitops:   {result.gitops}")


@click.command()
def schema() -> None:
    """Print the JSON Schema of trainops.yaml (for editors and CI)."""
    from trainops.spec.schema import pipeline_json_schema

    echo_json(pipeline_json_schema())


COMMANDS = (validate, plan, schema)
