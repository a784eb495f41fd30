"""The `release` group: package a checkpoint that passed its gates as a model; ls, show."""

from __future__ import annotations

from pathlib import Path

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option, wide_option
from trainops.cli.output import command_stdout, echo_columns, echo_folded, echo_json, fields_text, screen_width
from trainops.clock import display
from trainops.errors import UsageError
from trainops.units import format_size


@click.group("release")
def release_group() -> None:
    """Releases: checkpoints with a passing eval, published as immutable ModelPack models."""


@release_group.command("create")
@click.argument("checkpoint", required=False, metavar="[CKPT]", shell_complete=options.complete_reference)
@manifest_options
@click.option("--version", "version", metavar="TAG", default=None, help="Release tag (default: release.tag).")
@click.option("--force", is_flag=True, help="Release without a passing eval (needs --reason; recorded).")
@click.option("--reason", metavar="TEXT", default=None, help="Why the gates are overridden (with --force).")
@options.insecure_option
@output_option
def create_cmd(
    checkpoint: str | None,
    file: str | None,
    env: str | None,
    version: str | None,
    force: bool,
    reason: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Release CKPT (default: release.source — best or latest with a passing eval, or a
    reference) as a ModelPack model in release.repository, tagged from release.tag.

    Exits 8 when release.requireGates refuses it, 5 when the tag exists with other content.
    """
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.registry.context import Registries  # lazy: `trainops --help` loads no trainops.registry
    from trainops.release import create_release  # lazy: loads pydantic

    if reason is not None and not force:
        raise UsageError("--reason goes with --force")
    manifest = options.load(file, env)
    with (
        Registries.for_manifest(manifest, insecure=insecure) as registries,
        transfer_progress(output == "text") as progress,
    ):
        result = create_release(
            manifest=manifest,
            registries=registries,
            checkpoint=checkpoint,
            version=version,
            force=force,
            reason=reason,
            progress=progress,
            command_stdout=command_stdout(output),
        )
    if output == "json":
        echo_json(result)
        return
    verb = "released" if result.created else "already released"
    click.echo(f"{verb} {result.checkpoint} as {result.ref}")
    model = ", ".join(f"{k} {v}" for k, v in result.model.as_config().items())
    click.echo(f"  files: {', '.join(result.files)}" + (f"; {model}" if model else ""))
    if result.eval:
        click.echo(f"  evaluated by: {result.eval}")
    if result.forced:
        click.echo(f"  FORCED by {result.forced.by}: {result.forced.reason}")
    if result.signed_by:
        click.echo(
            f"  signed by:    {result.signed_by}" + ("" if result.signature else " (signature already attached)")
        )
    if result.provenance:
        click.echo(f"  provenance:   {result.provenance}")


@release_group.command("ls")
@click.argument("repo", required=False)
@options.registry_options
@output_option
@wide_option
def ls_cmd(repo: str | None, file: str | None, env: str | None, insecure: bool, output: str, wide: bool) -> None:
    """List the releases of REPO (default: the manifest's release.repository), newest first."""
    from trainops.release import list_releases, release_repository  # lazy: loads pydantic

    with options.registries(file, env, insecure) as registries:
        repository = registries.ref(repo) if repo else release_repository(options.load(file, env), registries)
        infos = list_releases(registries, repository=repository)
    if output == "json":
        echo_json(infos)
        return
    if not infos:
        click.echo(f"no release in {repository.repo_url}")
        return

    rows = []
    for i in infos:
        gates = "FORCED" if i.forced else ("passed" if i.eval else "-")
        rows.append(
            (i.version or "", format_size(i.size), display(i.created), gates, i.digest if wide else i.digest[:19])
        )
    width = None if wide else screen_width()
    echo_columns(repository.repo_url, ("version", "size", "created", "gates", "digest"), rows, width=width)


@release_group.command("show")
@click.argument("ref", metavar="RELEASE", shell_complete=options.complete_reference)
@options.registry_options
@output_option
@wide_option
def show_cmd(ref: str, file: str | None, env: str | None, insecure: bool, output: str, wide: bool) -> None:
    """Show RELEASE (a reference, or a version as `release ls` prints it): version,
    checkpoint, eval, override, model config and files."""
    from trainops.release import show_named_release  # lazy: loads tempfile, sqlite3

    with options.opened(file, env, insecure) as ctx:
        info = show_named_release(ctx, ref)
    if output == "json":
        echo_json(info)
        return
    fields = [("version", info.version or "-"), ("checkpoint", info.checkpoint or "-"), ("eval", info.eval or "-")]
    if info.forced:
        fields.append(("forced by", f"{info.by}: {info.reason}"))
    fields += [(key, str(value)) for key, value in info.model.items()]
    fields.append(("size", f"{format_size(info.size)} in {len(info.files)} file(s): {', '.join(info.files)}"))
    signed = ", ".join(info.signed_by) if info.signed_by else "not signed"
    fields.append(("signed by", signed + (" (as recorded; `release verify` checks it)" if info.signed_by else "")))
    fields.append(("provenance", info.provenance or "-"))
    click.echo("\n".join([info.ref, *fields_text(fields, wide=wide, pad=12)]))


@release_group.command("verify")
@click.argument("ref", shell_complete=options.complete_reference)
@click.option(
    "--key",
    "key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM public key (default: the manifest's release.signing.publicKey, or its key's public half).",
)
@options.registry_options
@output_option
@wide_option
def verify_cmd(
    ref: str, key: Path | None, file: str | None, env: str | None, insecure: bool, output: str, wide: bool
) -> None:
    """Verify release REF: its model signature with the key, its files pulled and checked
    against their digests, and its SLSA provenance against its lineage.

    Exits 7 naming every check that failed (a file, a key, a field of the provenance).
    """
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress

    # lazy: `trainops --help` loads no trainops.signing
    from trainops.signing.keys import load_public_key, verification_key
    from trainops.signing.verify import verify_release  # lazy: loads pydantic

    with options.registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
        if key is not None:
            public = load_public_key(key)
        else:
            from trainops.projectdir import find_manifest  # lazy: `trainops --help` loads no trainops.projectdir

            if file is None and find_manifest() is None:
                raise UsageError("no key to verify with: pass --key PUBLIC.pem, or -f a manifest with release.signing")
            manifest = options.load(file, env)
            spec = manifest.pipeline.spec.release
            public = verification_key(spec.signing if spec else None, root=manifest.root)
        result = verify_release(registries, ref=registries.ref(ref), public=public, progress=progress)
    if output == "json":
        echo_json(result)
        return
    echo_folded(f"verified {result.ref}", wide=wide)
    fields = [
        ("signed by", f"{result.key} ({result.signature})"),
        ("files", f"{len(result.files)} pulled, every byte checked against the signed digests"),
    ]
    deps: list[tuple[str, str]] = []
    if result.provenance is not None:
        p = result.provenance
        fields.append(("provenance", f"{p.build_type} by {p.builder} ({p.ref})"))
        if p.forced:
            fields.append(("FORCED", f"{p.forced.get('by')}: {p.forced.get('reason')}"))
        deps = [(name, uri) for name, _, uri in (dep.partition(" ") for dep in p.dependencies)]
    click.echo("\n".join([*fields_text(fields, wide=wide, pad=12), *fields_text(deps, wide=wide, indent=4)]))


COMMANDS: list[click.Command] = [release_group]
