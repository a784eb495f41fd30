"""The options commands share, in one place: -o/--output, --wide, -v, -f/--env (a manifest
found as git finds .git), --insecure, --image, --run-id, --no-move, --force --reason, KEY=VALUE lists; and
the two ways a command opens its project (the manifest, or the registries it names)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from trainops.errors import UsageError

if TYPE_CHECKING:
    from trainops.manifest import Manifest
    from trainops.registry.context import Opened, Registries

F = TypeVar("F", bound=Callable[..., Any])


def _completer(read: Callable[..., list[str]], *, env: bool = True) -> Callable[..., list[Any]]:
    """A click shell_complete callback offering what trainops.completion reads, with the -f
    and --env given so far on the command line."""

    def complete(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem  # lazy: `trainops --help` loads no click.shell_completion

        given = ctx.params
        names = read(given.get("file"), given.get("env"), incomplete) if env else read(given.get("file"), incomplete)
        return [CompletionItem(name) for name in names]

    return complete


def complete_env(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """--env: the manifest's environments."""
    from trainops import completion  # lazy: `trainops --help` loads no trainops.completion

    return _completer(completion.environments, env=False)(ctx, param, incomplete)


def complete_reference(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """A reference: the registry's repositories, then a repository's tags."""
    from trainops import completion  # lazy: `trainops --help` loads no trainops.completion

    return _completer(completion.references)(ctx, param, incomplete)


def complete_run(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """RUN: the runs the registry and this project recorded."""
    from trainops import completion  # lazy: `trainops --help` loads no trainops.completion

    return _completer(completion.run_ids)(ctx, param, incomplete)


def complete_incident(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """An incident id: those the registry records."""
    from trainops import completion  # lazy: `trainops --help` loads no trainops.completion

    return _completer(completion.incident_ids)(ctx, param, incomplete)


output_option = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Human text, or JSON for scripts.",
)

render_out_option = click.option(
    "-d",
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the tree to DIR (new, empty, or rendered before); default: print it.",
)

wide_option = click.option("--wide", is_flag=True, help="Every column, in full (the default table fits 80 columns).")

insecure_option = click.option("--insecure", is_flag=True, help="Allow plain HTTP to the registry (oci://).")

no_move_option = click.option(
    "--no-move",
    "no_move",
    is_flag=True,
    help="Refuse to move a tag that names other content (for tags that must never change, such as releases).",
)


def override_options(func: F) -> F:
    """--force --reason TEXT: move or remove a release tag on purpose. The command gets
    `override` (trainops.registry.retention.protect.override_from: None without --force) instead."""

    @functools.wraps(func)
    def command(*args: Any, force: bool, reason: str | None, **kwargs: Any) -> Any:
        # lazy: `trainops --help` loads no trainops.registry
        from trainops.registry.retention.protect import override_from

        return func(*args, override=override_from(force=force, reason=reason), **kwargs)

    with_reason = click.option("--reason", metavar="TEXT", default=None, help="Why (required with --force).")(command)
    return click.option("--force", is_flag=True, help="Move or remove a release tag (with --reason).")(with_reason)  # type: ignore[return-value]


jobs_option = click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None, help="Parallel transfers.")


def dedup_option(help_text: str, *, default: str | None) -> Callable[[F], F]:
    """--dedup off|chunks: the chunked form of large files (trainops.registry.chunks)."""
    return click.option(
        "--dedup",
        type=click.Choice(["off", "chunks"]),
        default=default,
        show_default=default is not None,
        help=help_text,
    )


_FILE_HELP = "The manifest (default: trainops.yaml here or in the nearest parent directory that has one)."


def image_option(help_text: str) -> Callable[[F], F]:
    """--image REF, with what the image is for and where its default comes from."""
    return click.option("--image", metavar="REF", default=None, help=help_text)


def run_id_option(help_text: str) -> Callable[[F], F]:
    return click.option("--run-id", metavar="ID", default=None, help=help_text)


def _bump_verbosity(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """`-v` after a subcommand says more, as it does before it (`trainops push -v …`)."""

    if value:
        root = logging.getLogger()
        root.setLevel(max(logging.DEBUG, min(root.level or logging.WARNING, logging.WARNING - 10 * value)))
    return value


verbose_option = click.option(
    "-v",
    "--verbose",
    "verbose",
    count=True,
    expose_value=False,
    is_eager=True,
    callback=_bump_verbosity,
    help="Say more (repeat for debug logs).",
)


def add_verbose(command: click.Command) -> None:
    """Give command and every subcommand the shared -v option (unless it has one)."""
    if not any("-v" in getattr(p, "opts", ()) for p in command.params):
        verbose_option(command)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_verbose(sub)


def manifest_options(func: F) -> F:
    """-f FILE and --env ENV, the two options of every command that reads trainops.yaml."""
    func = click.option(
        "--env",
        "env",
        metavar="ENV",
        default=None,
        help="Apply this environment's overlay.",
        shell_complete=complete_env,
    )(func)
    func = click.option(
        "-f", "--file", "file", type=click.Path(dir_okay=False, path_type=str), default=None, help=_FILE_HELP
    )(func)
    return func


def kubeconfig_options(func: F) -> F:
    """--kubeconfig FILE and --context NAME: the cluster a command reads (kubectl's options).
    The command gets them whole, as `access` (a ClusterAccess; None when neither is given)."""
    return _access_options(func, cluster_help=None)


def cluster_options(cluster_help: str) -> Callable[[F], F]:
    """--cluster (the user's own kubeconfig), --kubeconfig FILE and --context NAME: the cluster
    a command reads only when asked. The command gets `access` (None when none was asked)."""
    return functools.partial(_access_options, cluster_help=cluster_help)


def _access_options(func: F, *, cluster_help: str | None) -> F:
    @functools.wraps(func)
    def command(*args: Any, kubeconfig: str | None, context: str | None, cluster: bool = False, **kwargs: Any) -> Any:
        from trainops.cluster.access import ClusterAccess  # lazy: `trainops --help` loads no trainops.cluster

        return func(*args, access=ClusterAccess.named(kubeconfig, context, cluster=cluster), **kwargs)

    wrapped: Any = command
    if cluster_help is not None:
        wrapped = click.option("--cluster", "cluster", is_flag=True, help=cluster_help)(wrapped)
    wrapped = click.option(
        "--context", "context", metavar="NAME", default=None, help="The kubeconfig context (default: its current one)."
    )(wrapped)
    wrapped = click.option(
        "--kubeconfig",
        "kubeconfig",
        type=click.Path(dir_okay=False, path_type=str),
        default=None,
        metavar="FILE",
        help="The kubeconfig (default: $KUBECONFIG, else ~/.kube/config).",
    )(wrapped)
    return wrapped  # type: ignore[no-any-return]


def registry_options(func: F) -> F:
    """-f, --env and --insecure of commands that work with a manifest or without one (full references)."""
    func = insecure_option(func)
    func = click.option(
        "--env",
        "env",
        metavar="ENV",
        default=None,
        help="Environment overlay of trainops.yaml.",
        shell_complete=complete_env,
    )(func)
    func = click.option(
        "-f",
        "--file",
        "file",
        default=None,
        metavar="FILE",
        help="trainops.yaml whose spec.registry completes short references "
        "(default: trainops.yaml here or in a parent directory, if any).",
    )(func)
    return func


def load(file: str | None, env: str | None) -> Manifest:
    """The manifest -f names (else the nearest trainops.yaml), with --env's overlay."""
    from trainops.manifest import load_manifest  # lazy: loads pydantic
    from trainops.projectdir import manifest_path  # lazy: `trainops --help` loads no trainops.projectdir

    return load_manifest(manifest_path(file), env=env)


def opened(file: str | None, env: str | None, insecure: bool) -> Opened:
    """The manifest if there is one (-f, else the nearest trainops.yaml) and its registries."""
    from trainops.registry.context import open_registries  # lazy: `trainops --help` loads no trainops.registry

    return open_registries(file=file, env=env, insecure=insecure)


def registries(file: str | None, env: str | None, insecure: bool) -> Registries:
    return opened(file, env, insecure).registries


def key_values(values: tuple[str, ...], what: str) -> dict[str, str]:
    """KEY=VALUE options → a dict; a malformed one is a usage error naming the option."""

    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {item!r} must be KEY=VALUE")
        out[key] = value
    return out
