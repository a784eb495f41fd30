"""Commands that set up a project and a shell: init, completion."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli.options import output_option
from trainops.cli.output import echo_json

NEXT = (
    "trainops train run --local --env dev; trainops eval run --env dev; "
    "trainops release create --env dev; trainops rollout start --env dev"
)
"""What a new project runs next, as printed: each command takes its defaults from the manifest."""


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
    """Scaffold trainops.yaml, .gitignore, a CI workflow and a runnable minimal trainer in DIRECTORY."""
    from trainops.scaffold import init_project  # lazy: loads subprocess, tempfile

    result = init_project(directory=directory, name=name, force=force, ci=ci)
    if output == "json":
        echo_json(result)
        return
    for rel in result.written:
        click.echo(f"wrote   {directory / rel}")
    for rel in result.updated:
        click.echo(f"updated {directory / rel}")
    for rel in result.kept:
        click.echo(f"kept    {directory / rel} (yours: list docs and CI files in it, or they retrain)")
    if result.ci_note:
        click.echo(result.ci_note)
    if result.git_commit:
        by = f" as {result.git_author} (set git config user.name/user.email for yours)" if result.git_author else ""
        click.echo(f"git: a new repository, first commit {result.git_commit[:12]}{by}")
    click.echo(f"next (in {directory}): {NEXT}")


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (click's shell completion).

    \b
    bash:  eval "$(trainops completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(trainops completion zsh)"    (in ~/.zshrc)
    fish:  trainops completion fish > ~/.config/fish/completions/trainops.fish
    """
    from click.shell_completion import get_completion_class  # lazy: `trainops --help` loads no click.shell_completion

    root = click.get_current_context().find_root().command
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - the choice above lists only shells click has
        raise click.UsageError(f"no completion for {shell}")
    click.echo(cls(root, {}, "trainops", "_TRAINOPS_COMPLETE").source())


COMMANDS = (init, completion)
