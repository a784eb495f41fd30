"""Commands that read a manifest: validate, plan, schema."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option, wide_option
from trainops.cli.output import echo_columns, echo_json, fields_text, screen_width
from trainops.errors import ManifestError
from trainops.units import fold_reference

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess


@click.command()
@manifest_options
@click.option(
    "--render",
    "render",
    is_flag=True,
    help="Also render every target (the base spec and each environment) and check the objects against the CRDs.",
)
@click.option(
    "--crds",
    "crds",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="CRD YAML files to check against instead of the vendored ones (implies --render).",
)
@options.cluster_options("Also ask the cluster of the kubeconfig (implies --render; --kubeconfig implies it too).")
@output_option
def validate(
    file: str | None,
    env: str | None,
    render: bool,
    crds: Path | None,
    access: ClusterAccess | None,
    output: str,
) -> None:
    """Check trainops.yaml and every environment overlay; report all problems at once.

    With --render, render what each environment would deploy (a placeholder image digest
    stands in for the one a build makes) and check every object strictly against the
    upstream CRDs: a field the API server would drop is a problem. With spec.rollout, the
    serving objects too (a placeholder release, served as stable and as a canary).

    With --kubeconfig FILE (or --cluster, for $KUBECONFIG or ~/.kube/config) the cluster is
    asked too, read-only: every object is sent as a server-side apply with dryRun=All and
    fieldValidation=Strict (nothing is stored), and spec.cluster.topology is checked against
    the nodes' labels. Each refusal is reported at the manifest field the object came from.
    """
    # lazy: `trainops --help` loads no trainops.cluster
    from trainops.pipeline.validate import validate as validate_project
    from trainops.projectdir import manifest_path, shown  # lazy: `trainops --help` loads no trainops.projectdir

    path = manifest_path(file)
    result = validate_project(path=path, env=env, render=render, crds=crds, cluster=access)
    if output == "json":
        echo_json(result)
        if not result.ok:
            raise click.exceptions.Exit(ManifestError.exit_code)
        return
    if result.problems:
        result.raise_for_problems()
    checked = f"; environments checked: {', '.join(result.environments)}" if result.environments else ""
    click.echo(f"{file or shown(path)} is valid{checked}")
    for check in result.render or ():
        click.echo(f"render ({f'env {check.env}' if check.env else 'base'}): {_render_summary(check)}")
        for warning in check.warnings:
            click.echo(f"  warning: {warning}")
    for dry in result.cluster or ():
        refused = f", {len(dry.problems)} refused" if dry.problems else ""
        click.echo(
            f"cluster ({f'env {dry.env}' if dry.env else 'base'}): {dry.objects} objects sent to {dry.server} "
            f"(server-side apply, dry run){refused}"
        )
    if len(result.render_problems) > 1:
        for problem in result.render_problems:
            click.echo(str(problem), err=True)
    result.raise_for_problems()


def _render_summary(check: Any) -> str:
    """One line for a render check: what was checked against the CRDs (or why nothing was)."""
    if check.note and not check.counts:
        return str(check.note)
    if not check.counts and check.files:
        return f"{check.scheduler}: {', '.join(check.files)} rendered (not Kubernetes objects)"
    kinds = ", ".join(f"{kind.rsplit(' ', 1)[-1]} {n}" for kind, n in check.counts.items())
    plural = "" if check.objects == 1 else "s"
    return f"{check.scheduler or 'tenants'}: {check.objects} object{plural} checked against the CRDs ({kinds})"


@click.command()
@manifest_options
@output_option
@wide_option
def plan(file: str | None, env: str | None, output: str, wide: bool) -> None:
    """Show the stages the manifest defines, what each consumes and produces, and where it runs."""
    from trainops.pipeline.plan import plan_pipeline  # lazy: loads pydantic

    result = plan_pipeline(manifest=options.load(file, env))
    if output == "json":
        echo_json(result)
        return

    title = f"{result.pipeline}" + (f" (env {result.env})" if result.env else "")
    first = max(len("stage"), *(len(stage.name) for stage in result.stages))
    each = max(12, (screen_width() - first - 6) // 3)  # 6: the gaps between four columns
    rows: list[tuple[str, ...]] = []
    for stage in result.stages:
        cells = ("\n".join(stage.consumes), "\n".join(stage.produces), stage.runs_on)
        if rows:
            rows.append(("", "", "", ""))  # a blank line between stages, whose cells fold
        rows.append((stage.name, *(cell if wide else fold_reference(cell, each) for cell in cells)))
    echo_columns(title, ("stage", "consumes", "produces", "runs on"), rows)
    where = fields_text([("registry", result.registry), ("gitops", result.gitops)], indent=0, wide=wide)
    click.echo("\n".join(["", *where]))


@click.command()
def schema() -> None:
    """Print the JSON Schema of trainops.yaml (for editors and CI)."""
    from trainops.manifest.schema import pipeline_json_schema  # lazy: loads pydantic

    echo_json(pipeline_json_schema())


COMMANDS = (validate, plan, schema)
