"""The checkpoints of a repository: what each `step-N` tag holds, newest by step."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainops import podenv
from trainops.errors import InputError, NotFoundError
from trainops.projectdir import no_manifest
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.listing import Tagged, tagged_manifests
from trainops.registry.reference import Reference

if TYPE_CHECKING:
    from trainops.manifest import Manifest
    from trainops.manifest.pipeline import PipelineSpec
    from trainops.manifest.stages import TrainSpec

STEP_TAG = re.compile(r"^step-([0-9]+)$")
A_NAME = media.A_CKPT_NAME
A_LAYOUT = media.A_CKPT_LAYOUT
KIND = "checkpoint"


@dataclass(frozen=True)
class CheckpointInfo:
    tag: str
    digest: str
    ref: str  # repo:tag@sha256:… (pinned)
    step: int | None
    run_id: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    created: str | None = None
    name: str | None = None  # the directory name it was pushed from
    layout: str | None = None


def require_repository(repository: Reference, *, where: str | None = None) -> Reference:
    """`repository` itself, refused when it names a tag or digest (checkpoints are tagged step-N);
    `where` names the field or argument it came from, for the message."""
    if repository.tag or repository.digest:
        said = f"{where}: {str(repository)!r}" if where else str(repository)
        raise InputError(
            f"{said} names a tag or digest", hint="name the checkpoint repository only; checkpoints are tagged step-N"
        )
    return repository


def declared_repository(spec: PipelineSpec, *, pipeline: str, train: TrainSpec | None) -> tuple[str, str]:
    """The checkpoint repository a manifest declares, and the field it comes from:
    train.checkpoint.repository, else <spec.registry>/<pipeline>/checkpoints."""
    override = train.checkpoint.repository if train is not None else None
    where = "train.checkpoint.repository" if override else "spec.registry"
    return spec.repository(pipeline, "checkpoints", override), where


def checkpoint_repository(
    registries: Registries,
    *,
    manifest: Manifest | None,
    given: str | None = None,
    environ: Mapping[str, str] | None = None,
    given_as: str = "REPO",
) -> Reference:
    """The checkpoint repository, the one rule for every command and run: the argument
    `given`, else $TRAINOPS_CKPT_REPOSITORY of `environ` (default os.environ), else the
    manifest's train.checkpoint.repository, else <spec.registry>/<pipeline>/checkpoints.
    `given_as` is how the caller's user passes `given` (for the hint when nothing is found)."""
    environ = os.environ if environ is None else environ
    text = given or environ.get(podenv.CKPT_REPOSITORY) or None
    where = "the argument" if given else podenv.CKPT_REPOSITORY
    if text is None and manifest is not None:
        pipeline = manifest.pipeline
        text, where = declared_repository(pipeline.spec, pipeline=pipeline.metadata.name, train=pipeline.spec.train)
    if text is None:
        raise NotFoundError(
            f"no checkpoint repository given, and {no_manifest()}",
            hint=f"pass {given_as}, set {podenv.CKPT_REPOSITORY}, or pass -f FILE",
        )
    return require_repository(registries.ref(text), where=where)


def tag_names(registries: Registries, *, repository: Reference, must_exist: bool = False) -> list[str]:
    """The tags of a repository, less the records of pruned checkpoints; a missing
    repository has none, or, with must_exist, is NotFoundError."""
    require_repository(repository)
    try:
        names = registries.backend(repository).list_tags(repository.repository)
    except NotFoundError:
        if must_exist:
            raise NotFoundError(
                f"no repository {repository.repo_url}: no checkpoint was pushed to it",
                hint="train first (checkpoints are pushed as they land); `trainops registry ls` lists the repositories",
            ) from None
        return []
    return [name for name in names if not name.startswith(media.PRUNED_TAG_PREFIX)]  # tombstone's record tags


def tagged(registries: Registries, *, repository: Reference) -> list[Tagged]:
    """Every tag of the repository with its manifest."""
    return tagged_manifests(registries, repository=repository, tags=tag_names(registries, repository=repository))


def info_of(repository: Reference, item: Tagged) -> CheckpointInfo:
    lineage = item.parsed.lineage()  # no pydantic: `ckpt ls` reads thousands
    step = lineage.step
    if step is None and (match := STEP_TAG.match(item.tag)):
        step = int(match.group(1))
    return CheckpointInfo(
        tag=item.tag,
        digest=item.parsed.digest,
        ref=f"{repository.repo_url}:{item.tag}@{item.parsed.digest}",  # the repository names no tag
        step=step,
        run_id=lineage.run_id,
        metrics=dict(lineage.metrics),
        created=item.parsed.created,
        name=item.parsed.annotations.get(A_NAME),
        layout=item.parsed.annotations.get(A_LAYOUT),
    )


def _order(info: CheckpointInfo) -> tuple[int, int, str]:
    return (-1 if info.step is None else info.step, 1 if STEP_TAG.match(info.tag) else 0, info.tag)


def list_checkpoints(
    registries: Registries, *, repository: Reference, must_exist: bool = False
) -> list[CheckpointInfo]:
    """The checkpoint artifacts tagged in a repository, sorted by step (no step first). A
    repository that does not exist has none, or, with must_exist (`ckpt ls`), is NotFoundError."""
    names = tag_names(registries, repository=repository, must_exist=must_exist)
    found = tagged_manifests(registries, repository=repository, tags=names)
    infos = [info_of(repository, t) for t in found if t.parsed.kind == KIND]
    return sorted(infos, key=_order)


def latest_checkpoint(registries: Registries, *, repository: Reference) -> CheckpointInfo | None:
    """The checkpoint with the highest step (its step-N tag if several tags name it).

    Reads the manifest of the highest step-N tag and of the tags not named step-N, not of
    every checkpoint: a repository that keeps thousands answers as fast as one with three.
    """
    names = tag_names(registries, repository=repository)
    numbered = sorted(((int(m.group(1)), n) for n in names if (m := STEP_TAG.match(n))), reverse=True)
    others = [n for n in names if not STEP_TAG.match(n)]
    found = [
        info_of(repository, t)
        for t in tagged_manifests(registries, repository=repository, tags=others)
        if t.parsed.kind == KIND
    ]
    for _, name in numbered:
        items = tagged_manifests(registries, repository=repository, tags=[name])
        if items and items[0].parsed.kind == KIND:
            found.append(info_of(repository, items[0]))
            break
    with_step = sorted((i for i in found if i.step is not None), key=_order)
    return with_step[-1] if with_step else None


def ranked(
    infos: list[CheckpointInfo],
    *,
    metric: str,
    mode: str,
    value: Callable[[CheckpointInfo], float | None] | None = None,
) -> list[CheckpointInfo]:
    """The checkpoints that have a value of metric, best first (min or max; ties: newest step
    first). value(info) gives it, by default the checkpoint's own recorded metric."""
    get = value or (lambda info: info.metrics.get(metric))
    scored = [(v, info) for info in infos if (v := get(info)) is not None]
    sign = 1.0 if mode == "min" else -1.0
    return [info for _, info in sorted(scored, key=lambda item: (sign * item[0], -(item[1].step or 0)))]


def best_checkpoint(registries: Registries, *, repository: Reference, metric: str, mode: str) -> CheckpointInfo | None:
    """The checkpoint of repository with the best recorded metric, or None."""
    found = ranked(list_checkpoints(registries, repository=repository), metric=metric, mode=mode)
    return found[0] if found else None
