"""Retention: keep the newest N checkpoints and the best K by a metric; untag the rest.

Only `step-N` tags of checkpoint artifacts are ever touched. When no other tag names a
removed checkpoint's manifest, the manifest goes too: later checkpoints name it as their
parent, and `trainops registry gc` keeps whatever a kept artifact's lineage names, so an
untagged-but-present parent would pin every older checkpoint forever. Before that, a
pruned record (trainops.registry.retention.tombstone) keeps its digest, step, metrics and parents,
so the lineage of the kept checkpoints still walks through it; its blobs are reclaimed by
gc (file://, s3://) or the registry's own garbage collector (oci://).

Retention asks trainops.registry.retention.keep before it removes anything: a checkpoint that a kept
artifact needs — the one a release was made from (its lineage parent), the subject of
what is kept — stays, and the result says why (`kept`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import dataclass, field

from pydantic import ValidationError

from trainops.checkpoint.catalog import KIND, STEP_TAG, CheckpointInfo, info_of, ranked, tagged
from trainops.errors import NotFoundError, RemoteError, UsageError
from trainops.manifest.stages import Retention
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.registry.retention import removal, tombstone
from trainops.registry.retention.keep import Kept, kept_by_others, neighbourhood


@dataclass(frozen=True)
class RetentionPlan:
    keep: list[CheckpointInfo] = field(default_factory=list)
    remove: list[CheckpointInfo] = field(default_factory=list)


def plan_retention(infos: list[CheckpointInfo], keep: Retention, protect: Collection[str] = ()) -> RetentionPlan:
    """Which step-N checkpoints to keep and which to remove (pure: no registry calls)."""
    managed = [i for i in infos if i.step is not None and STEP_TAG.match(i.tag)]
    by_step = sorted(managed, key=lambda i: (i.step or 0, i.created or ""), reverse=True)
    kept = {i.tag for i in by_step[: keep.last]}
    if keep.best and keep.metric:
        kept.update(i.tag for i in ranked(managed, metric=keep.metric, mode=keep.mode)[: keep.best])
    shielded = set(protect)
    kept.update(i.tag for i in managed if i.tag in shielded or i.digest in shielded)
    return RetentionPlan(
        keep=[i for i in by_step if i.tag in kept],
        remove=sorted((i for i in managed if i.tag not in kept), key=lambda i: i.step or 0),
    )


def retention_override(
    base: Retention | None,
    *,
    last: int | None = None,
    best: int | None = None,
    metric: str | None = None,
    mode: str | None = None,
) -> Retention | None:
    """The policy given on the command line (it replaces the manifest's keep as a whole), else base."""

    given = {"last": last, "best": best, "metric": metric, "mode": mode}
    if all(v is None for v in given.values()):
        return base
    try:
        return Retention.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as err:
        message = err.errors()[0]["msg"].removeprefix("Value error, ")
        raise UsageError(f"retention: {message}", hint="--keep-best needs --metric (and --mode min|max)") from None


@dataclass(frozen=True)
class PruneResult:
    """What retention did to a repository (or would do, with dry_run)."""

    repository: str
    dry_run: bool
    removed: list[str]
    kept: list[Kept] = field(default_factory=list)  # what the policy would have removed, and why it stays


def apply_retention(
    registries: Registries,
    *,
    repository: Reference,
    keep: Retention,
    protect: Collection[str] = (),
    dry_run: bool = False,
) -> PruneResult:
    """Remove the step-N checkpoints retention does not keep, unless something kept needs
    them (trainops.registry.retention.keep).

    protect: tags (or digests) never removed. With dry_run, nothing is removed and the
    tags that would be are returned.
    """
    items = tagged(registries, repository=repository)
    infos = [info_of(repository, t) for t in items if t.parsed.kind == KIND]
    plan = plan_retention(infos, keep, protect)
    here = repository.repo_url
    needed: dict[tuple[str, str], str] = {}
    if plan.remove:
        candidates = {(here, i.digest) for i in plan.remove}
        needed = kept_by_others(registries, neighbourhood(registries, repository), candidates)
    kept = [
        Kept(str(repository.with_tag(i.tag)), needed[(here, i.digest)])
        for i in plan.remove
        if (here, i.digest) in needed
    ]
    going = [i for i in plan.remove if (here, i.digest) not in needed]
    if dry_run:
        return PruneResult(repository.repo_url, dry_run, [i.tag for i in going], kept)
    digest_tags: dict[str, set[str]] = {}
    for t in items:
        digest_tags.setdefault(t.parsed.digest, set()).add(t.tag)
    parsed_of = {t.parsed.digest: t.parsed for t in items}
    removed: list[str] = []
    for info in going:
        # the record first: the kept checkpoints' lineage walks on through the pruned one
        tombstone.write_record(
            registries, repository=repository, parsed=parsed_of[info.digest], shown=str(repository.with_tag(info.tag))
        )
        try:
            removal.remove(registries, ref=repository.with_tag(info.tag))
        except NotFoundError:
            continue  # another process removed it first
        except RemoteError:
            continue  # e.g. a registry that deletes manifests, not tags, and another tag names it
        removed.append(info.tag)
        others = digest_tags.get(info.digest, set()) - {info.tag}
        digest_tags[info.digest] = others
        if not others:
            _remove_manifest(registries, repository, info.digest)
    return PruneResult(repository.repo_url, dry_run, removed, kept)


def _remove_manifest(registries: Registries, repository: Reference, digest: str) -> None:
    """Delete an untagged checkpoint manifest. It may be gone already (a registry that
    deletes the manifest with its last tag), and a registry may refuse deletes."""
    with contextlib.suppress(RemoteError):
        removal.delete_manifest(registries.backend(repository), repository.repository, digest)
