"""The `image` group: render the Dockerfile of a standard image, build it, tag it, push it."""

from __future__ import annotations

from typing import Any

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option
from trainops.cli.output import echo_json


@click.group()
def image() -> None:
    """Standard images: render the Dockerfile, build with docker or layer, tag and push."""


@image.command("render")
@manifest_options
@output_option
def render(file: str | None, env: str | None, output: str) -> None:
    """Print the Dockerfile the docker builder would build from the image section."""
    from trainops.image.api import render_image  # lazy: loads pydantic

    rendered = render_image(options.load(file, env))
    if output == "json":
        echo_json(rendered)
        return
    click.echo(rendered.dockerfile, nl=False)


def _log(enabled: bool) -> Any:
    if not enabled:
        return None
    return lambda text: click.echo(text, nl=False, err=True)


@image.command("build")
@manifest_options
@click.option("--push", is_flag=True, help="Push to the image repository (default <registry>/<name>/image).")
@click.option(
    "--builder",
    type=click.Choice(["docker", "layer"]),
    default=None,
    help="docker: any Docker-API engine at DOCKER_HOST; layer: no engine (default: image.builder).",
)
@click.option("--insecure", is_flag=True, help="Allow plain HTTP to an oci:// registry trainops reads or writes.")
@output_option
def build(file: str | None, env: str | None, push: bool, builder: str | None, insecure: bool, output: str) -> None:
    """Build the image (or reuse it when its inputs digest is already tagged), tagged with the
    git commit and the inputs digest."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.image.api import build_image  # lazy: loads pydantic

    manifest = options.load(file, env)
    text = output == "text"
    with transfer_progress(text) as progress:
        result = build_image(manifest, builder=builder, push=push, insecure=insecure, log=_log(text), progress=progress)
    if output == "json":
        echo_json(result)
        return
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if result.skipped:
        where = result.repository if result.pushed or result.builder == "layer" else result.local_image
        click.echo(f"skipped: inputs unchanged ({result.tags[0]} is already in {where}); reusing that image", err=True)
    elif result.pushed:
        click.echo(f"built with {result.builder} in {result.seconds:.2f}s and pushed", err=True)
    else:
        hint = "" if result.builder == "docker" else " (nothing written: pass --push)"
        click.echo(f"built with {result.builder} in {result.seconds:.2f}s, not pushed{hint}", err=True)
    for ref in result.refs:
        click.echo(f"  {ref}", err=True)
    if result.digest and (result.pushed or result.skipped):
        click.echo(f"{result.repository}@{result.digest}")  # it is in the registry
    elif result.digest:
        click.echo(result.digest)  # the digest --push would write
    else:
        click.echo(result.local_image or result.image_id or "")


COMMANDS = (image,)
