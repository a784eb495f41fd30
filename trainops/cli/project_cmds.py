"""Commands that set up a project: init."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli.output import echo_json, output_option


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--name", default=None, help="Pipeline name (default: from the directory name).")
@click.option("--force", is_flag=True, help="Replace existing files.")
@click.option(
    "--ci",
    type=click.Choice(["github", "gitlab", "none"]),
    default="github",
    show_default=True,
    help="CI system whose workflow runs `trainops ci` on every push.",
)
@output_option
def init(directory: Path, name: str | None, force: bool, ci: str, output: str) -> None:
    """Scaffold trainops.yaml, .gitignore and a CI workflow in DIRECTORY."""
    from trainops.scaffold import init_project

    result = init_project(directory=directory, name=name, force=force, ci=ci)
    if output == "json":
        echo_json(
            {
                "directory": str(result.directory),
                "written": [str(p) for p in result.written],
                "updated": [str(p) for p in result.updated],
            }
        )
        return
    for rel in result.written:
        click.echo(f"wrote   {directory / rel}")
    for rel in result.updated:
        click.echo(f"updated {directory / rel}")
    click.echo(f"next: edit {directory / 'trainops.yaml'}, then run `trainops validate`")


COMMANDS = (init,)
