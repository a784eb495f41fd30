"""The `rollout` group: serving objects, and gray release as GitOps commits (trainops.rollout)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option, render_out_option, wide_option
from trainops.cli.output import echo_columns, echo_json, fields_text
from trainops.clock import display
from trainops.errors import UsageError

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess

_image_option = options.image_option(
    "Serving image (name@sha256:…, or a tag resolved now); default: the serve image built for HEAD."
)


def _print_action(result: Any, output: str) -> None:
    if output == "json":
        echo_json(result)
        for warning in result.warnings:
            click.echo(f"warning: {warning}", err=True)
        return
    for line in result.analysis:
        click.echo(line)
    if result.stale:
        click.echo(
            f"{result.action}: another operator changed the rollout first; nothing committed (now {result.step})"
        )
        return
    state = result.after
    if state.canary is not None:
        stable = state.stable.version if state.stable else "none"
        what = f"canary {state.canary.version} at {result.weight}% (step {result.step}), stable {stable}"
    else:
        what = f"{state.stable.version if state.stable else 'nothing'} serves 100%"
    commit = result.commit[:12] if result.commit else "nothing to commit"
    click.echo(f"{result.action}: {what} — {commit} in {result.path}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.group()
def rollout() -> None:
    """Serving and gray release: render, start, promote, abort, rollback — each a GitOps commit."""


@rollout.command("render")
@click.argument("release", required=False, shell_complete=options.complete_reference)
@manifest_options
@render_out_option
@_image_option
@options.insecure_option
@output_option
def render_cmd(
    release: str | None,
    file: str | None,
    env: str | None,
    out: Path | None,
    image: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Render the serving objects of RELEASE (default: rollout.model) for rollout.engine × rollout.traffic."""
    from trainops.rollout import render_rollout  # lazy: loads pydantic

    result = render_rollout(options.load(file, env), release=release, image=image, out=out, insecure=insecure)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output == "json":
        echo_json(result)
        return
    if out is None:
        click.echo(result.text(), nl=False)
        return
    click.echo(f"rendered {len(result.files)} files into {result.directory} (release {result.release})")
    for name in sorted(result.files):
        click.echo(f"  {name}")


@rollout.command("start")
@click.argument("release", required=False, shell_complete=options.complete_reference)
@manifest_options
@_image_option
@options.insecure_option
@output_option
def start_cmd(
    release: str | None, file: str | None, env: str | None, image: str | None, insecure: bool, output: str
) -> None:
    """Commit the first canary step of RELEASE (default: the newest release of
    release.repository); stable: the release served now."""
    from trainops.rollout import start_rollout  # lazy: loads pydantic

    _print_action(start_rollout(options.load(file, env), release=release, image=image, insecure=insecure), output)


@rollout.command("promote")
@manifest_options
@click.option("--full", is_flag=True, help="Promote the canary to stable at once.")
@click.option("--auto", is_flag=True, help="Step by step while rollout.analysis holds; abort if not.")
@options.cluster_options(
    "Read the cluster ($KUBECONFIG, else ~/.kube/config) whatever the manifest declares; see below."
)
@output_option
def promote_cmd(
    file: str | None,
    env: str | None,
    full: bool,
    auto: bool,
    access: ClusterAccess | None,
    output: str,
) -> None:
    """Advance the canary one step (a commit).

    The Rollout is read first, from --kubeconfig/--context, else (when the manifest declares
    Argo CD or Argo Rollouts) from $KUBECONFIG or ~/.kube/config: a canary Argo Rollouts
    aborted is not promoted (a promote would clear the abort); with no kubeconfig at all it
    warns that the cluster was not checked. With a cluster so read and traffic argo-rollouts,
    --auto waits for each committed step's AnalysisRun in the cluster instead of measuring
    Prometheus itself."""
    from trainops.rollout import auto_promote, promote  # lazy: loads pydantic

    if full and auto:
        raise UsageError("promote takes --full or --auto, not both")
    manifest = options.load(file, env)
    _print_action(
        auto_promote(manifest, cluster=access) if auto else promote(manifest, full=full, cluster=access), output
    )


@rollout.command("abort")
@manifest_options
@output_option
def abort_cmd(file: str | None, env: str | None, output: str) -> None:
    """Return all traffic to the stable release (a commit)."""
    from trainops.rollout import abort  # lazy: loads pydantic

    _print_action(abort(options.load(file, env)), output)


@rollout.command("rollback")
@manifest_options
@click.option(
    "--to",
    "to",
    metavar="VERSION",
    default=None,
    help="Release tag or digest served before (default: the previous one).",
)
@output_option
def rollback_cmd(file: str | None, env: str | None, to: str | None, output: str) -> None:
    """Make an earlier release stable again: its serving tree, byte for byte, in a new commit."""
    from trainops.rollout import rollback  # lazy: loads pydantic

    _print_action(rollback(options.load(file, env), to=to), output)


@rollout.command("status")
@manifest_options
@options.cluster_options("Also read the cluster ($KUBECONFIG, else ~/.kube/config).")
@output_option
@wide_option
def status_cmd(
    file: str | None,
    env: str | None,
    access: ClusterAccess | None,
    output: str,
    wide: bool,
) -> None:
    """What the GitOps repo serves now; with a kubeconfig, also what Argo CD and Argo Rollouts did with it."""
    from trainops.rollout import rollout_status  # lazy: loads pydantic

    status = rollout_status(options.load(file, env), access=access)
    if output == "json":
        echo_json(status)
        return
    fields = [("path", status.path), ("commit", status.commit[:12] if status.commit else "-")]
    fields.append(("stable", f"{status.stable.version}  {status.stable.release}" if status.stable else "-"))
    if status.canary is not None:
        fields.append(("canary", f"{status.canary.version}  {status.canary.release}"))
        fields.append(("weight", f"{status.weight}% (step {status.step})"))
    else:
        fields.append(("canary", "none"))
    click.echo("\n".join(fields_text(fields, wide=wide, indent=0, pad=9)))
    if status.live is not None:
        for line in _live_lines(status.live):
            click.echo(line)


def _live_lines(live: Any) -> list[str]:
    from trainops.rollout.live import analysis_text  # lazy: loads pydantic

    lines = [f"cluster: {live.server}"]
    lines += [f"  missing: {what}" for what in live.missing]
    for app in live.applications:
        revision = f" at {app.revision[:12]}" if app.revision else ""
        lines.append(f"  application {app.name} ({app.path}): {app.sync}, {app.health}{revision}")
        if app.message:
            lines.append(f"    {app.message}")
    ro = live.rollout
    if ro is None:
        if not live.missing:
            lines.append("  rollout: not in the cluster (yet)")
        return lines
    step = f"step {ro.step} ({ro.doing})" if ro.step is not None else "no canary step"
    lines.append(f"  rollout {ro.namespace}/{ro.name}: {ro.phase}, {step}" + (", ABORTED" if ro.aborted else ""))
    if ro.controller_step is not None and ro.step is not None:
        lines.append(f"    controller: step index {ro.controller_step} of its {ro.controller_steps} steps")
    if ro.stuck:
        lines.append(f"    stuck: {ro.message}")
    elif ro.message:
        lines.append(f"    {ro.message}")
    for rs in ro.replica_sets:
        lines.append(f"    {rs.role:<7} {rs.name}: {rs.ready}/{rs.replicas} ready")
    if ro.weights:
        weights = ", ".join(f"{w.service} {w.weight}" for w in ro.weights)
        lines.append(
            f"    httproute {ro.route}: {weights}"
            + (f"; header routes: {', '.join(ro.header_routes)}" if ro.header_routes else "")
        )
    if ro.analysis is not None:
        lines.append(f"    {analysis_text(ro.analysis)}")
        if ro.analysis.message:
            lines.append(f"      {ro.analysis.message}")
    if ro.aborted:
        lines.append("    the controller aborted the canary: `trainops rollout abort` commits the stable tree")
    return lines


@rollout.command("history")
@manifest_options
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True, help="Commits to show.")
@output_option
@wide_option
def history_cmd(file: str | None, env: str | None, limit: int, output: str, wide: bool) -> None:
    """The rollout commits, newest first, from their trailers."""
    from trainops.rollout import rollout_history  # lazy: loads pydantic

    items = rollout_history(options.load(file, env), limit=limit)
    if output == "json":
        echo_json(items)
        return
    if not items:
        click.echo("no rollout commits yet")
        return

    rows = [(i.commit if wide else i.commit[:12], display(i.date), i.action, i.version, i.step) for i in items]
    echo_columns("", ("commit", "date", "action", "version", "step"), rows)


COMMANDS = [rollout]
