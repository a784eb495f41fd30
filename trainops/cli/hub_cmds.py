"""Hugging Face Hub commands: `hub import` (Hub → registry) and `hub export` (registry → Hub)."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli.output import echo_json, output_option
from trainops.cli.registry_cmds import _registries, _registry_options
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
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None, help="Parallel transfers.")
@_registry_options
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
    """Import a Hub model (REPO_ID at REVISION, default main) and push it to REF as a ModelPack model."""
    from trainops.cli.progress import transfer_progress
    from trainops.hub.hfapi import parse_repo_spec
    from trainops.hub.importer import import_model

    repo_id, revision = parse_repo_spec(repo_spec)
    with _registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
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
        echo_json(
            {
                "ref": str(pushed.ref),
                "digest": pushed.digest,
                "files": pushed.files,
                "bytesTotal": pushed.bytes_total,
                "bytesSent": pushed.bytes_sent,
                "blobsSkipped": pushed.blobs_skipped,
                "seconds": round(pushed.seconds, 3),
                "repoId": result.repo_id,
                "revision": result.revision,
                "commit": result.commit,
                "snapshot": str(result.snapshot),
            }
        )
        return
    click.echo(
        f"imported {result.repo_id}@{result.commit or result.revision or 'unknown revision'}: "
        f"{pushed.files} file(s), {format_size(pushed.bytes_total)} "
        f"({format_size(pushed.bytes_sent)} sent, {pushed.blobs_skipped} blob(s) already there) "
        f"in {pushed.seconds:.2f}s",
        err=True,
    )
    click.echo(pushed.digest)


COMMANDS = (hub,)
