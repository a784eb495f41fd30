"""`trainops ui`: the read-only registry browser in a web browser."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops.cli import options

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess


@click.command("ui")
@click.option(
    "--registry",
    "registries_",
    multiple=True,
    metavar="URL",
    help="A registry to browse (repeatable); default: the manifest's spec.registry.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind; anything but loopback needs --token."
)
@click.option(
    "--port",
    default=8321,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to bind (0: a free one; stderr says which).",
)
@click.option("--token", envvar="TRAINOPS_UI_TOKEN", default=None, help="Require this token (env TRAINOPS_UI_TOKEN).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
@click.option(
    "--refresh",
    "refresh_seconds",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds between index refreshes (0: never).",
)
@click.option(
    "--index",
    "index_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The SQLite index file (default: in trainops' cache).",
)
@options.cluster_options("The rollout page reads the cluster too ($KUBECONFIG, else ~/.kube/config).")
@options.registry_options
def ui(
    registries_: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
    refresh_seconds: float,
    index_path: Path | None,
    access: ClusterAccess | None,
    file: str | None,
    env: str | None,
    insecure: bool,
) -> None:
    """Browse repositories, artifacts, lineage and training curves (read-only)."""
    from trainops.ui.server import prepare, serve  # lazy: loads pydantic

    opened = options.opened(file, env, insecure)
    registries = opened.registries
    urls = list(registries_) or ([registries.default_registry] if registries.default_registry else [])
    prepared = prepare(
        registries=registries,
        urls=urls,
        host=host,
        token=token,
        index_path=index_path,
        manifest=opened.manifest,
        cluster=access,
    )
    shown = f"[{host}]" if ":" in host else host

    def listening(bound: int) -> None:
        url = f"http://{shown}:{bound}/"
        _say_serving(prepared, url=url, token=token)
        if open_browser:
            import webbrowser  # lazy: loads webbrowser

            webbrowser.open(url)

    serve(prepared, host=host, port=port, refresh_seconds=refresh_seconds, on_listening=listening)


def _say_serving(prepared: Any, *, url: str, token: str | None) -> None:
    """On stderr: what the first index refresh found (or that it runs in the background), and where."""
    first = prepared.first_refresh
    if first is None:
        click.echo(f"serving the index {prepared.index_path}; refreshing it in the background", err=True)
    else:
        count = f"{first.repositories} repositories ({first.artifacts_added} artifacts)"
        click.echo(f"indexed {count} in {first.seconds:.1f} s", err=True)
        for problem in first.errors:
            click.echo(f"warning: {problem}", err=True)
    click.echo(
        f"serving {url} (read-only; Ctrl-C stops)" + (" — open it with ?token=YOUR_TOKEN" if token else ""), err=True
    )


COMMANDS = [ui]
