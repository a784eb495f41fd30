"""Commands that read a manifest: validate, plan, schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from trainops.cli.output import console, echo_json, kubeconfig_options, manifest_options, output_option


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
@click.option(
    "--cluster",
    "cluster",
    is_flag=True,
    help="Also ask the cluster of the kubeconfig (implies --render; --kubeconfig implies it too).",
)
@kubeconfig_options
@output_option
def validate(
    file: str,
    env: str | None,
    render: bool,
    crds: Path | None,
    cluster: bool,
    kubeconfig: str | None,
    context: str | None,
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
    from trainops.errors import InputError, ManifestError
    from trainops.serialize import to_data
    from trainops.spec import check_manifest

    ask = cluster or kubeconfig is not None or context is not None
    render = render or ask
    report = check_manifest(Path(file), env=env)
    checks = _render_checks(Path(file), env, report.environments, crds) if report.ok and (render or crds) else []
    render_problems = [p for check in checks for p in check.problems]
    asked = _cluster_checks(Path(file), env, report.environments, kubeconfig, context) if report.ok and ask else []
    render_problems += [p for check in asked for p in check.problems]
    if output == "json":
        data: dict[str, object] = {
            "file": file,
            "ok": report.ok and not render_problems,
            "environments": report.environments,
            "problems": [p.as_dict() for p in report.problems],
        }
        if render or crds:
            data["render"] = [check.as_dict() for check in checks]
        if ask:
            data["cluster"] = to_data(asked)
        echo_json(data)
        if not data["ok"]:
            raise click.exceptions.Exit(ManifestError.exit_code)
        return
    if not report.ok:
        raise ManifestError(report.problems)
    checked = f"; environments checked: {', '.join(report.environments)}" if report.environments else ""
    click.echo(f"{file} is valid{checked}")
    for check in checks:
        where = f"env {check.env}" if check.env else "base"
        if check.note and not check.counts:
            summary = check.note
        else:
            kinds = ", ".join(f"{kind.rsplit(' ', 1)[-1]} {n}" for kind, n in check.counts.items())
            plural = "" if check.objects == 1 else "s"
            summary = (
                f"{check.scheduler or 'tenants'}: {check.objects} object{plural} checked against the CRDs ({kinds})"
            )
            if not check.counts and check.files:
                summary = f"{check.scheduler}: {', '.join(check.files)} rendered (not Kubernetes objects)"
        click.echo(f"render ({where}): {summary}")
        for warning in check.warnings:
            click.echo(f"  warning: {warning}")
    for asked_check in asked:
        where = f"env {asked_check.env}" if asked_check.env else "base"
        refused = f", {len(asked_check.problems)} refused" if asked_check.problems else ""
        click.echo(
            f"cluster ({where}): {asked_check.objects} objects sent to {asked_check.server} "
            f"(server-side apply, dry run){refused}"
        )
    if len(render_problems) == 1:
        raise InputError(str(render_problems[0]))
    if render_problems:
        for problem in render_problems:
            click.echo(str(problem), err=True)
        raise InputError(
            f"{len(render_problems)} problems in the rendered objects",
            hint="fix the manifest (or its spec.patches) and run `trainops validate --render` again",
        )


def _render_checks(path: Path, env: str | None, environments: list[str], crds: Path | None) -> list[Any]:
    """check_render (and check_serving, with spec.rollout) for the base spec and each environment (or just --env)."""
    from trainops.render import check_render
    from trainops.serve.check import check_serving
    from trainops.spec import load_manifest

    targets: list[str | None] = [env] if env else [None, *environments]
    checks = []
    for target in targets:
        manifest = load_manifest(path, env=target)
        serving = check_serving(manifest, crds_dir=crds)
        for check in [check_render(manifest, crds_dir=crds), *([serving] if serving else [])]:
            checks.append(_tag_env(check, target) if target and not env else check)
    return checks


def _cluster_checks(
    path: Path, env: str | None, environments: list[str], kubeconfig: str | None, context: str | None
) -> list[Any]:
    from trainops.cluster.dryrun import check_against_cluster

    targets: list[str | None] = [env] if env else [None, *environments]
    return check_against_cluster(path, targets=targets, kubeconfig=kubeconfig, context=context)


def _tag_env(check: Any, env: str) -> Any:
    """Problems of an environment say so, as manifest problems do."""
    from dataclasses import replace

    problems = [replace(p, message=f"{p.message} (with --env {env})") for p in check.problems]
    return replace(check, problems=problems)


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

    from trainops.units import fold_reference

    title = f"{result.pipeline}" + (f" (env {result.env})" if result.env else "")
    table = Table(title=title, show_lines=True)
    out = console()
    first = max(len("stage"), *(len(stage.name) for stage in result.stages))
    each = max(12, (out.width - first - 13) // 3)  # 13: the borders and padding of four columns
    table.add_column("stage", width=first)
    for column in ("consumes", "produces", "runs on"):
        table.add_column(column, overflow="fold", width=each)
    for stage in result.stages:
        cells = ("\n".join(stage.consumes), "\n".join(stage.produces), stage.runs_on)
        table.add_row(stage.name, *(fold_reference(cell, each) for cell in cells))
    out.print(table)
    out.print(f"registry: {result.registry}\ngitops:   {result.gitops}")


@click.command()
def schema() -> None:
    """Print the JSON Schema of trainops.yaml (for editors and CI)."""
    from trainops.spec.schema import pipeline_json_schema

    echo_json(pipeline_json_schema())


COMMANDS = (validate, plan, schema)
