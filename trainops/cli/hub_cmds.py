"""Hugging Face Hub commands: `hub import` (Hub → registry) and `hub export` (registry → Hub)."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli import options
from trainops.cli.options import output_option
from trainops.cli.output import echo_json
from trainops.units import format_size


@click.group()
def hub() -> None:
    """Move models between the Hugging Face Hub and the registry (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE)."""


@hub.command("import")
@click.argument("repo_spec", metavar="REPO_ID[@REVISION]")
@click.argument("ref")
@click.option("--include", "include", multiple=True, metavar="GLOB", help="Only files matching (repeatable).")
@click.option("--exclude", "exclude", multiple=True, metavar="GLOB", help="Leave out files matching (repeatable).")
@click.option(
    "--from-dir",
    "from_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Import offline from a local snapshot, an HF cache, or a repository folder in one.",
)
@options.jobs_option
@options.registry_options
@output_option
def import_cmd(
    repo_spec: str,
    ref: str,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    from_dir: Path | None,
    jobs: int | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Import a Hub model and push it to REF as a ModelPack model.

    REVISION is a branch, tag or commit (default main). HF_TOKEN, HF_ENDPOINT,
    HF_HUB_OFFLINE and the HF cache are honoured."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.hub.hfapi import parse_repo_spec  # lazy: `trainops --help` loads no trainops.hub
    from trainops.hub.importer import import_model  # lazy: loads tempfile, sqlite3

    repo_id, revision = parse_repo_spec(repo_spec)
    with options.registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
        result = import_model(
            registries,
            repo_id=repo_id,
            revision=revision,
            ref=registries.ref(ref),
            include=include,
            exclude=exclude,
            from_dir=from_dir,
            jobs=jobs,
            progress=progress,
        )
    pushed = result.push
    if output == "json":
        echo_json(result)
        return
    if result.signature:
        click.echo(f"kept its model signature (model.sig) as {result.signature}", err=True)
    click.echo(
        f"imported {result.repo_id}@{result.commit or result.revision or 'unknown revision'}: "
        f"{pushed.files} file(s), {format_size(pushed.bytes_total)} "
        f"({format_size(pushed.bytes_sent)} sent, {pushed.blobs_skipped} blob(s) already there) "
        f"in {pushed.seconds:.2f}s",
        err=True,
    )
    click.echo(pushed.digest)


@hub.command("export")
@click.argument("ref")
@click.argument("repo_id")
@click.option("--revision", default=None, metavar="BRANCH", help="Branch to commit to (default main; created if new).")
@click.option("--private", is_flag=True, help="Create the repository private (when it does not exist).")
@click.option("--create-pr", is_flag=True, help="Open a pull request instead of committing to the branch.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None, help="Parallel transfers of the pull.")
@options.registry_options
@output_option
def export_cmd(
    ref: str,
    repo_id: str,
    revision: str | None,
    private: bool,
    create_pr: bool,
    jobs: int | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Upload the artifact REF to the Hub as one commit on REPO_ID.

    The files are pulled verified; a model card (README.md) is written from the
    lineage unless the artifact has one. A branch that moved since the upload
    started is refused (exit 5)."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.hub.exporter import export_model  # lazy: loads tempfile, sqlite3
    from trainops.hub.hfapi import parse_repo_spec  # lazy: `trainops --help` loads no trainops.hub

    repo, at = parse_repo_spec(repo_id)
    if at:
        raise click.UsageError("name the branch with --revision, not REPO_ID@REVISION")
    with options.registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
        result = export_model(
            registries,
            ref=registries.ref(ref),
            repo_id=repo,
            revision=revision,
            private=private,
            create_pr=create_pr,
            jobs=jobs,
            progress=progress,
        )
    if output == "json":
        echo_json(result)
        return
    card = " (model card written from the lineage)" if result.card_written else ""
    click.echo(f"exported {len(result.files)} file(s) of {result.source} to {result.repo_id}@{result.revision}{card}")
    click.echo(result.pr_url or result.commit_url)


COMMANDS = (hub,)
