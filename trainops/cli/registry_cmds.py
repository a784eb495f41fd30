"""Registry commands: push, pull, lineage, and the `registry` group (ls, show, tag, diff, copy, rm, gc)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainops.cli import options
from trainops.cli.options import key_values, output_option, wide_option
from trainops.cli.output import echo_columns, echo_json, fields_text, folded, lineage_text, screen_width
from trainops.clock import display
from trainops.errors import UsageError
from trainops.units import format_size as _size
from trainops.units import natural_key

if TYPE_CHECKING:
    from trainops.registry.retention.protect import Override

KINDS = ("checkpoint", "model", "dataset", "eval", "other")


def _lineage_options(func: Any) -> Any:
    """--parent, --annotation, --step, --metric, --run-id: what push records with the artifact."""
    for option in reversed(
        (
            click.option(
                "--parent", "parents", multiple=True, metavar="REF", help="An artifact this one came from (repeatable)."
            ),
            click.option(
                "--annotation", "annotations", multiple=True, metavar="K=V", help="A manifest annotation (repeatable)."
            ),
            click.option("--step", type=click.IntRange(0), default=None, help="Training step (lineage)."),
            click.option("--metric", "metrics", multiple=True, metavar="K=V", help="A metric (lineage, repeatable)."),
            click.option("--run-id", default=None, help="Run id (lineage)."),
        )
    ):
        func = option(func)
    return func


def _say_moved(tag: str | None, old: str | None, new: str, override: Any = None) -> None:
    """A tag that now names other content says so, on stderr (with the reason, when forced)."""
    if old is not None:
        forced = f" (forced: {override.reason})" if override is not None else ""
        click.echo(f"moved tag {tag}: {old} → {new}{forced}", err=True)


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.argument("ref", shell_complete=options.complete_reference)
@click.option("--kind", type=click.Choice(KINDS), default="other", show_default=True)
@_lineage_options
@options.jobs_option
@options.dedup_option(
    "chunks: files of 1 MiB or more go in the chunked form, sending only chunks the repository lacks.", default="off"
)
@options.no_move_option
@options.override_options
@options.registry_options
@output_option
def push(
    path: Path,
    ref: str,
    kind: str,
    parents: tuple[str, ...],
    annotations: tuple[str, ...],
    step: int | None,
    metrics: tuple[str, ...],
    run_id: str | None,
    jobs: int | None,
    dedup: str,
    no_move: bool,
    override: Override | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Push PATH (a file or a directory tree) as an artifact to REF; print its digest.

    A release tag moves only with --force --reason; a directory's model.sig is kept as its signature."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.signing.imported import push_tree  # lazy: loads tempfile, sqlite3

    try:
        metric_values = {k: float(v) for k, v in key_values(metrics, "--metric").items()}
    except ValueError:
        raise UsageError("--metric values must be numbers, as in --metric val_loss=1.93") from None
    with options.registries(file, env, insecure) as registries:
        from trainops.registry.parents import source_lineage  # lazy: loads tempfile, sqlite3

        lineage = source_lineage(
            registries,
            source=path,
            run_id=run_id,
            step=step,
            metrics=metric_values,
            parents=[(p, "parent") for p in parents],
        )
        model = None
        if kind == "model" and path.is_dir():
            from trainops.registry.tensors import model_config  # lazy: loads tempfile, sqlite3

            model = model_config(path)
        with transfer_progress(output == "text") as progress:
            result = push_tree(
                registries,
                source=path,
                ref=registries.ref(ref),
                kind=kind,
                lineage=lineage,
                annotations=key_values(annotations, "--annotation"),
                jobs=jobs,
                progress=progress,
                move_tag=not no_move,
                model=model,
                override=override,
                dedup=dedup,
            )
    if output == "json":
        echo_json(result)
        return
    _say_pushed(result, override)


def _say_pushed(result: Any, override: Any) -> None:
    """What a push did, for people: the transfer on stderr, the digest on stdout."""
    _say_moved(result.ref.tag, result.moved_from, result.digest, override)
    click.echo(
        f"pushed {result.files} file(s), {_size(result.bytes_total)} "
        f"({_size(result.bytes_sent)} sent, {result.blobs_skipped} blob(s) already there"
        + (f", {_size(result.bytes_shared)} in chunks already there" if result.bytes_shared else "")
        + ") "
        f"in {result.seconds:.2f}s",
        err=True,
    )
    if result.signature:
        click.echo(f"kept model.sig as the signature {result.signature}", err=True)
    click.echo(result.digest)


@click.command()
@click.argument("ref", shell_complete=options.complete_reference)
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@options.jobs_option
@click.option(
    "--verify-signature",
    is_flag=True,
    help="Refuse REF unless its model signature verifies with --key (checked before any file is fetched).",
)
@click.option(
    "--key",
    "key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM public key (with --verify-signature).",
)
@options.registry_options
@output_option
def pull(
    ref: str,
    dest: Path,
    jobs: int | None,
    verify_signature: bool,
    key: Path | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Pull the artifact REF into DEST; every file is verified before it appears."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.registry import pulling  # lazy: loads tempfile, sqlite3

    if verify_signature != (key is not None):
        raise UsageError("--verify-signature and --key PUBLIC.pem go together")
    with options.registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
        if key is not None:
            from trainops.signing.keys import load_public_key  # lazy: `trainops --help` loads no trainops.signing
            from trainops.signing.verify import pull_verified  # lazy: loads pydantic

            public = load_public_key(key)
            result = pull_verified(
                registries, ref=registries.ref(ref), dest=dest, public=public, jobs=jobs, progress=progress
            )
        else:
            result = pulling.pull(registries, ref=registries.ref(ref), dest=dest, jobs=jobs, progress=progress)
    if output == "json":
        echo_json(result)
        return
    click.echo(f"pulled {len(result.files)} file(s), {_size(result.bytes_total)} into {dest} in {result.seconds:.2f}s")


@click.command()
@click.argument("ref", shell_complete=options.complete_reference)
@click.option("--up", "direction", flag_value="up", default=True, help="What REF came from (default).")
@click.option("--down", "direction", flag_value="down", help="What came from REF.")
@click.option("--both", "direction", flag_value="both", help="Both directions.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tree", "mermaid", "dot", "json"]),
    default="tree",
    show_default=True,
    help="The text form: an indented tree, or a Mermaid or Graphviz graph (json: same as -o json).",
)
@click.option(
    "--registry",
    "--scan",
    "scan",
    default=None,
    metavar="URL",
    help="Registry to search for descendants.",
)
@click.option("--records", is_flag=True, help="Also show the stage records of `trainops run` (hidden by default).")
@options.registry_options
@output_option
def lineage(
    ref: str,
    direction: str,
    fmt: str,
    scan: str | None,
    records: bool,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Walk the lineage graph of REF, up to its origins or down to what came from it.

    REF is an artifact reference, or git:REV for a git commit of the training code (a sha,
    full or 7+ hex digits, or HEAD, a branch, a tag: resolved in the manifest's repository).
    A commit's graph always walks down: commit → image → checkpoints → eval reports →
    releases → the rollout commits that served them (with spec.rollout).
    """
    from trainops.pipeline.lineage import walk_lineage  # lazy: loads tempfile, sqlite3
    from trainops.registry.lineage import to_dot, to_mermaid, to_tree  # lazy: loads tempfile, sqlite3

    opened = options.opened(file, env, insecure)
    with opened.registries as registries:
        graph = walk_lineage(
            registries,
            opened.manifest,
            target=ref,
            direction=direction,  # type: ignore[arg-type]
            scan=scan,
            records=records,
        )
    if graph.note:
        click.echo(f"note: {graph.note}", err=True)
    if output == "json" or fmt == "json":
        echo_json(graph)
    elif fmt == "tree":
        click.echo(to_tree(graph, width=screen_width()))  # folded to the screen, or 80 piped
    else:
        click.echo({"mermaid": to_mermaid, "dot": to_dot}[fmt](graph))


@click.group()
def registry() -> None:
    """Browse and manage artifacts: ls, show, tag, diff, copy, rm, gc."""


@registry.command("ls")
@click.argument("target", required=False, shell_complete=options.complete_reference)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list records: pruned checkpoints' tags, the stages and incidents repositories.",
)
@click.option(
    "-l",
    "--long",
    "long_",
    is_flag=True,
    help="Also show each tag's kind, created time, size and digest (reads every manifest).",
)
@options.registry_options
@output_option
@wide_option
def ls(
    target: str | None,
    show_all: bool,
    long_: bool,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
    wide: bool,
) -> None:
    """List repositories of a registry (URL, default: the manifest's), or the tags of REPO."""

    with options.registries(file, env, insecure) as registries:
        from trainops.registry import listing as listing_mod  # lazy: loads concurrent.futures

        listing = listing_mod.ls(registries, target=target, records=show_all, details=long_)
    listing.tags.sort(key=lambda t: natural_key(t.tag))
    if output == "json":
        echo_json(listing)
        return
    if listing.repository is None and long_:
        untagged = set(listing.untagged)
        for name in listing.repositories:
            click.echo(f"{name}  (no tags: no artifact; an interrupted push's blobs)" if name in untagged else name)
    elif listing.repository is None or not long_:
        names = listing.repositories if listing.repository is None else [t.tag for t in listing.tags]
        if names:
            click.echo("\n".join(names))
    else:
        cut = None if wide else 19
        rows = [
            (t.tag, t.kind or "", display(t.created), _size(t.size or 0), (t.digest or "")[:cut]) for t in listing.tags
        ]
        width = None if wide else screen_width()  # a long tag on a line of its own, within 80 piped
        echo_columns(listing.repository, ("tag", "kind", "created", "size", "digest"), rows, width=width)
    left = [(listing.pruned_records, "records of pruned checkpoints"), (listing.bookkeeping, "record repositories")]
    for count, what in left:  # notes: stdout is the names alone, for pipes
        if count:
            click.echo(f"(and {count} {what}: --all lists them)", err=True)


@registry.command("show")
@click.argument("ref", shell_complete=options.complete_reference)
@options.registry_options
@output_option
@wide_option
def show(ref: str, file: str | None, env: str | None, insecure: bool, output: str, wide: bool) -> None:
    """Show an artifact: files, sizes, digests, kind, annotations, lineage and referrers;
    for a model or checkpoint also its tensors (read from the safetensors headers only)."""
    from trainops.registry.tensors import show as show_artifact  # lazy: loads tempfile, sqlite3

    with options.registries(file, env, insecure) as registries:
        shown = show_artifact(registries, ref=registries.ref(ref))
    if output == "json":
        echo_json(shown)
        return
    lines = _show_lines(shown, wide=wide)
    if shown.tensors is not None:
        lines.extend(_tensor_lines(shown.tensors))
    click.echo("\n".join(lines))


_LINEAGE_LABELS = {
    "pipeline": "pipeline",
    "runId": "run",
    "step": "step",
    "metrics": "metrics",
    "gitCommit": "commit",
    "gitRepo": "git repo",
    "imageDigest": "image",
    "environment": "python",
}


def _show_lines(info: Any, *, wide: bool) -> list[str]:
    """`registry show` for people: aligned fields, values as text, each said once."""
    fields: list[tuple[str, str]] = [
        ("digest", info.digest),
        ("kind", f"{info.kind} ({info.artifact_type or info.media_type})"),
        ("created", display(info.created) or "-"),
        ("size", f"{_size(info.size)} in {len(info.files)} file(s)"),
    ]
    for key, value in info.lineage.items():
        if value in ({}, [], None):
            continue
        fields.append((_LINEAGE_LABELS.get(key, key), lineage_text(key, value)))
    for parent in info.parents:
        relation = "" if parent["relation"] == "parent" else f" ({parent['relation']})"
        fields.append(("parent", f"{parent['ref']}@{parent['digest'][:19]}{relation}"))
    if info.subject:
        fields.append(("subject", info.subject))
    if info.chunked is not None:
        fields.append(("chunked", f"{info.chunked.packs} pack(s), {_size(info.chunked.pack_bytes)}"))
        if info.chunked.bytes_shared_with_parent is not None:
            shared = info.chunked.bytes_shared_with_parent
            share = f" ({100 * shared / info.size:.0f} %)" if info.size else ""
            fields.append(("shared", f"{_size(shared)}{share} with parent {info.chunked.parent[:19]}"))
    out = [info.ref, *fields_text(fields, wide=wide, pad=10)]
    if info.annotations:
        out.append("  annotations:")
        for key, value in info.annotations.items():
            out += folded(f"{key} = {value}", indent=4, wide=wide)
    out.append("  files:")
    out += [f"    {f.digest[:19]}  {_size(f.size):>10}  {f.path}" for f in info.files]
    if info.referrers:
        out.append("  referrers:")
        out += [f"    {r.record or r.kind:<11}{r.digest[:19]}" for r in info.referrers]
    return out


def _tensor_lines(t: Any) -> list[str]:
    dtypes = ", ".join(f"{name} {count:,}" for name, count in t.dtypes.items())
    lines = [
        f"  tensors:  {t.tensors:,} in {t.files} safetensors file(s), {t.parameters:,} parameters",
        f"  dtypes:   {dtypes}",
        f"  (read {_size(t.header_bytes)} of headers, not the {_size(t.bytes_total)} of tensors)",
        "  shapes (most parameters first):",
    ]
    for s in t.shapes:
        shape = "×".join(str(d) for d in s.shape) or "scalar"
        lines.append(f"    {s.tensors:>5} × {s.dtype:<5} {shape:<24} {s.parameters:>15,} params")
    lines.extend(f"  unreadable: {reason}" for reason in t.unreadable.values())
    return lines


@registry.command("tag")
@click.argument("src", shell_complete=options.complete_reference)
@click.argument("dst")
@options.no_move_option
@options.override_options
@options.registry_options
@output_option
def tag(
    src: str,
    dst: str,
    no_move: bool,
    override: Override | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Point tag DST at the artifact SRC (copying it if DST is another repository).

    DST is REPO:TAG, or a bare TAG in SRC's repository (as crane tag). A tag that names a
    release moves only with --force --reason."""
    from trainops.registry import store  # lazy: loads tempfile, sqlite3

    with options.registries(file, env, insecure) as registries:
        source = registries.ref(src)
        target = registries.tag_ref(dst, beside=source)
        result = store.tag(registries, src=source, dst=target, move_tag=not no_move, override=override)
    if output == "json":
        echo_json(result)
    else:
        _say_moved(result.dst.tag, result.moved_from, result.digest, override)
        click.echo(f"{result.dst}")


@registry.command("copy")
@click.argument("src", shell_complete=options.complete_reference)
@click.argument("dst")
@options.jobs_option
@options.no_move_option
@options.override_options
@options.registry_options
@output_option
def copy(
    src: str,
    dst: str,
    jobs: int | None,
    no_move: bool,
    override: Override | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Copy an artifact, with its referrers (signatures, eval reports), between any two registries; digest unchanged."""
    from trainops.cli.progress import transfer_progress  # lazy: `trainops --help` loads no trainops.cli.progress
    from trainops.registry import store  # lazy: loads tempfile, sqlite3

    with options.registries(file, env, insecure) as registries, transfer_progress(output == "text") as progress:
        result = store.copy(
            registries,
            src=registries.ref(src),
            dst=registries.ref(dst),
            jobs=jobs,
            progress=progress,
            move_tag=not no_move,
            override=override,
        )
    if output == "json":
        echo_json(result)
        return
    _say_moved(result.dst.tag, result.moved_from, result.digest, override)
    more = f", {len(result.referrers)} referrer(s) carried" if result.referrers else ""
    click.echo(f"copied to {result.dst} ({result.blobs_copied} blob(s) copied, {result.blobs_skipped} skipped{more})")


@registry.command("diff")
@click.argument("a", shell_complete=options.complete_reference)
@click.argument("b", shell_complete=options.complete_reference)
@options.registry_options
@output_option
def diff(a: str, b: str, file: str | None, env: str | None, insecure: bool, output: str) -> None:
    """Files added, removed and modified between artifacts A and B."""
    from trainops.registry.inspect import diff as diff_artifacts  # lazy: loads tempfile, sqlite3

    with options.registries(file, env, insecure) as registries:
        result = diff_artifacts(registries, a=registries.ref(a), b=registries.ref(b))
    if output == "json":
        echo_json(result)
        return
    for change in result.added:
        click.echo(f"+ {change.path} ({_size(change.new.size if change.new else 0)})")
    for change in result.removed:
        click.echo(f"- {change.path}")
    for change in result.modified:
        click.echo(f"M {change.path}")
    click.echo(
        f"{len(result.added)} added, {len(result.removed)} removed, {len(result.modified)} modified, "
        f"{result.unchanged} unchanged ({_size(result.bytes_shared)} shared)"
    )
    if result.chunk_bytes_shared != result.bytes_shared:
        click.echo(f"{_size(result.chunk_bytes_shared)} shared chunk by chunk")


@registry.command("rm")
@click.argument("ref", shell_complete=options.complete_reference)
@options.override_options
@options.registry_options
@output_option
def rm(ref: str, override: Override | None, file: str | None, env: str | None, insecure: bool, output: str) -> None:
    """Remove a tag (REPO:TAG) or a manifest with its tags (REPO@sha256:…).

    A release needs --force --reason; one the manifest's GitOps repo serves is never removed."""
    from trainops.rollout.protect import remove_unless_served  # lazy: loads pydantic

    with options.opened(file, env, insecure) as opened:
        registries = opened.registries
        result = remove_unless_served(registries, ref=registries.ref(ref), manifest=opened.manifest, override=override)
    if output == "json":
        echo_json(result)
    else:
        forced = f" (forced: {override.reason})" if override is not None else ""
        click.echo(f"removed {result.removed} {result.ref}{forced}")


@registry.command("gc")
@click.argument("url", required=False)
@click.option(
    "--keep-last", type=click.IntRange(0), default=None, help="Keep only the newest N tagged artifacts per repository."
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option(
    "--grace",
    type=click.FloatRange(0),
    default=3600.0,
    show_default=True,
    help="Seconds an unfinished upload or a push's lease (an interrupted push) is left alone before it is removed.",
)
@options.override_options
@options.registry_options
@output_option
def gc(
    url: str | None,
    keep_last: int | None,
    dry_run: bool,
    grace: float,
    override: Override | None,
    file: str | None,
    env: str | None,
    insecure: bool,
    output: str,
) -> None:
    """Remove artifacts and blobs that no kept artifact needs (parents are always kept).

    Never removed: what the manifest's GitOps repo serves, releases (unless --force
    --reason), and what a kept artifact needs (lineage parents, eval reports, signatures,
    provenance). Safe while pushes run: a repository with a push in flight is left whole."""
    from trainops.rollout.protect import collect_unless_served  # lazy: loads pydantic

    with options.opened(file, env, insecure) as ctx:
        result = collect_unless_served(
            ctx.registries, url, ctx.manifest, override=override, keep_last=keep_last, dry_run=dry_run, grace=grace
        )
    if output == "json":
        echo_json(result)
        return
    verb = "would remove" if dry_run else "removed"
    for name in result.removed_manifests:
        click.echo(f"{verb} {name}")
    for kept in result.kept_for:
        click.echo(f"kept {kept.artifact}: {kept.reason}")
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(
        f"{verb} {len(result.removed_manifests)} artifact(s), {result.removed_blobs} blob(s), "
        f"{result.removed_uploads} unfinished upload(s), {result.removed_leases} stale lease(s), "
        f"{_size(result.bytes_freed)}; kept {result.kept}"
        + (f"; left {len(result.skipped_repositories)} busy repositories whole" if result.skipped_repositories else "")
    )


COMMANDS = (push, pull, lineage, registry)
