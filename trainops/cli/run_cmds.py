"""`trainops run` (the whole flow, cached by content) and `trainops ci` (the same, for a push)."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option
from trainops.cli.output import echo_columns, echo_json, screen_width
from trainops.errors import UsageError


class _Lines:
    """One line per event on stderr (CI logs, pipes)."""

    def __call__(self, event: Any) -> None:
        click.echo(f"trainops: [{event.stage}] {event.kind}: {event.message}", err=True)


class _Live:
    """One live table of the stages on a terminal (rich)."""

    def __init__(self, live: Any) -> None:
        self.live = live
        self.rows: dict[str, tuple[str, str]] = {}

    def __call__(self, event: Any) -> None:
        status = {"note": "running", "start": "running", "plan": "planned"}.get(event.kind, event.kind)
        self.rows[event.stage] = (status, event.message)
        self.live.update(self._table())

    def _table(self) -> Any:
        from rich.table import Table  # lazy: loads rich

        table = Table(box=None, pad_edge=False)
        table.add_column("stage")
        table.add_column("status")
        table.add_column("", overflow="ellipsis", no_wrap=True, max_width=60)
        for name, (status, message) in self.rows.items():
            table.add_row(name, status, message)
        return table


@contextmanager
def _progress() -> Iterator[Any]:
    if not sys.stderr.isatty():
        yield _Lines()
        return
    from rich.console import Console  # lazy: loads rich
    from rich.live import Live  # lazy: loads rich

    with Live(console=Console(stderr=True), transient=False, refresh_per_second=8) as live:
        yield _Live(live)


def _options(**kw: Any) -> Any:
    from trainops.pipeline.run import RunOptions  # lazy: loads pydantic

    return RunOptions(**kw)


def _force_options(func: Any) -> Any:
    """--force --reason TEXT: roll out a release the GitOps history shows rolled back or
    aborted. The command gets `force_reason` (None without --force) instead."""

    @functools.wraps(func)
    def command(*args: Any, force: bool, reason: str | None, **kwargs: Any) -> Any:
        if force and not (reason and reason.strip()):
            raise UsageError("--force needs --reason TEXT: say why the release is rolled out again")
        if reason and not force:
            raise UsageError("--reason goes with --force", hint="add --force, or drop --reason")
        return func(*args, force_reason=reason.strip() if force and reason else None, **kwargs)

    with_reason = click.option("--reason", metavar="TEXT", default=None, help="Why (required with --force).")(command)
    return click.option(
        "--force",
        is_flag=True,
        help="Roll out even a release the GitOps history shows rolled back or aborted (with --reason).",
    )(with_reason)


def _cluster_options(func: Any) -> Any:
    """--timeout, --settle, --kubeconfig, --context: how `run` follows a job on a cluster."""
    for option in reversed(
        (
            click.option(
                "--timeout",
                type=float,
                default=24 * 3600.0,
                show_default=True,
                help="Cluster: seconds to wait for a job.",
            ),
            click.option(
                "--settle",
                type=float,
                default=300.0,
                show_default=True,
                help="Cluster without --kubeconfig: the job is taken as finished when no checkpoint of it arrived "
                "for this many seconds.",
            ),
            click.option(
                "--kubeconfig",
                "kubeconfig",
                type=click.Path(dir_okay=False, path_type=str),
                default=None,
                metavar="FILE",
                help="Cluster: read the job's status from this cluster; training is finished when the job is "
                "(not --settle).",
            ),
            click.option(
                "--context", "context", metavar="NAME", default=None, help="The kubeconfig context (with --kubeconfig)."
            ),
        )
    ):
        func = option(func)
    return func


def _short(text: str) -> str:
    """References with their digest cut to 12 hex digits, for an 80-column table."""

    return re.sub(r"(sha256:[0-9a-f]{12})[0-9a-f]{52}", r"\1", text)


def _print_run(result: Any) -> None:
    rows = []
    for stage in result.stages:
        status = {"runs": "runs", "cached": "cached", "ran": "ran"}.get(stage.status, stage.status)
        shown = stage.error or ", ".join(o.ref or o.digest for o in stage.outputs) or stage.why
        if stage.status in ("runs", "skipped"):
            shown = stage.why  # the STATUS column already says runs or skipped
        rows.append((stage.name, status, _short(shown)))
    echo_columns("", ("stage", "status", "output / why"), rows, width=screen_width())


@click.command("run")
@manifest_options
@click.option(
    "--from", "start", metavar="STAGE", default=None, help="First stage to run (earlier ones must be cached)."
)
@click.option("--to", "stop", metavar="STAGE", default=None, help="Last stage to run.")
@click.option("--dry-run", is_flag=True, help="Say what each stage would do: cached (artifact) or runs (why).")
@click.option("--executor", type=click.Choice(["local", "cluster"]), default=None, help="Default: by train.scheduler.")
@_cluster_options
@click.option(
    "--serve-image",
    metavar="REF",
    default=None,
    help="Rollout: the serving image (name@sha256:…, or a tag resolved now); default: the one built for HEAD.",
)
@_force_options
@click.option(
    "--fresh",
    is_flag=True,
    help="Local training starts from step 0: nothing restored; its step-N tags replace an older run's.",
)
@click.option("--insecure", is_flag=True, help="Allow plain HTTP to the registry (oci://).")
@output_option
def run_cmd(
    file: str | None,
    env: str | None,
    start: str | None,
    stop: str | None,
    dry_run: bool,
    executor: str | None,
    timeout: float,
    settle: float,
    kubeconfig: str | None,
    context: str | None,
    serve_image: str | None,
    force_reason: str | None,
    fresh: bool,
    insecure: bool,
    output: str,
) -> None:
    """Run the manifest's stages as one flow; a stage whose output for its key is in the
    registry is skipped and its output reused (a release taken off: see --force)."""
    from trainops.cluster.access import ClusterAccess  # lazy: `trainops --help` loads no trainops.cluster
    from trainops.pipeline.run import run_pipeline  # lazy: loads pydantic

    manifest = options.load(file, env)
    run_options = _options(
        start=start,
        stop=stop,
        dry_run=dry_run,
        executor=executor,
        insecure=insecure,
        timeout=timeout,
        quiet=settle,
        cluster=ClusterAccess(kubeconfig, context) if kubeconfig is not None else None,
        serve_image=serve_image,
        force_reason=force_reason,
        fresh=fresh,
        command_stdout=sys.stderr,
    )
    with _progress() as sink:
        result = run_pipeline(manifest=manifest, options=run_options, on_event=sink)
    if output == "json":
        echo_json(result)
    else:
        _print_run(result)
    if result.error is not None:
        raise result.error


@click.command("ci")
@manifest_options
@click.option(
    "--since",
    metavar="REV",
    default=None,
    help="The commit before the change (default: from CI variables); all zeros: a new branch, every stage runs.",
)
@click.option(
    "--until",
    metavar="REV",
    default=None,
    help="The pushed commit (default: HEAD); all zeros: the branch was deleted, nothing runs.",
)
@click.option("--dry-run", is_flag=True, help="Say what would run and why; run nothing.")
@click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Markdown summary file.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, help="JUnit XML file.")
@click.option("--serve-image", metavar="REF", default=None, help="Rollout: the serving image (see `trainops run`).")
@_force_options
@click.option("--insecure", is_flag=True, help="Allow plain HTTP to the registry (oci://).")
@output_option
def ci_cmd(
    file: str | None,
    env: str | None,
    since: str | None,
    until: str | None,
    dry_run: bool,
    summary: Path | None,
    junit: Path | None,
    serve_image: str | None,
    force_reason: str | None,
    insecure: bool,
    output: str,
) -> None:
    """For CI: run the stages the pushed change affects; write a step summary and JUnit XML.

    The range is --since REV..--until REV (default HEAD), else GitHub Actions' or GitLab CI's
    variables; a git hook passes its oldrev and newrev as they are. The summary goes to
    --summary, else $GITHUB_STEP_SUMMARY when set.
    """
    from trainops.pipeline.ci import run_ci  # lazy: loads pydantic
    from trainops.pipeline.cireport import junit_xml, markdown_summary  # lazy: loads pydantic

    manifest = options.load(file, env)
    with _progress() as sink:
        result = run_ci(
            manifest=manifest,
            since=since,
            until=until,
            environ=os.environ,
            options=_options(
                dry_run=dry_run,
                insecure=insecure,
                serve_image=serve_image,
                force_reason=force_reason,
                command_stdout=sys.stderr,
            ),
            on_event=sink,
        )
    target = summary or (Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY") else None)
    if target is not None:
        with target.open("a", encoding="utf-8") as fh:
            fh.write(markdown_summary(result))
    if junit is not None:
        junit.write_text(junit_xml(result), encoding="utf-8")
    if output == "json":
        echo_json(result)
    else:
        click.echo(f"affected: {result.decision.reason}")
        if result.run is not None:
            _print_run(result.run)
    if result.run is not None and result.run.error is not None:
        raise result.run.error


COMMANDS: list[click.Command] = [run_cmd, ci_cmd]
