"""The checkpoints of a repository: what each `step-N` tag holds, newest by step."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from trainops.errors import InputError, NotFoundError
from trainops.registry import media, tombstone
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Tagged:
    """A tag of the repository and the manifest it points at."""

    tag: str
    parsed: ParsedManifest


def require_repository(repository: Reference) -> None:
    if repository.tag or repository.digest:
        raise InputError(f"{repository} names a tag or digest", hint="pass the checkpoint repository itself")


def tag_names(registries: Registries, *, repository: Reference) -> list[str]:
    """The tags of a repository, less the records of pruned checkpoints; a missing
    repository has none."""
    require_repository(repository)
    try:
        names = registries.backend(repository).list_tags(repository.repository)
    except NotFoundError:
        return []
    return [name for name in names if not tombstone.is_record_tag(name)]


def fetch(registries: Registries, *, repository: Reference, tags: list[str]) -> list[Tagged]:
    """The manifests the tags point at (in parallel on remote registries); tags removed
    meanwhile are left out."""
    backend = registries.backend(repository)

    def one(tag: str) -> Tagged | None:
        try:
            return Tagged(tag, parse_manifest(backend.get_manifest(repository.repository, tag)))
        except NotFoundError:
            return None

    if repository.scheme == "file" or len(tags) < 2:
        found = [one(t) for t in tags]
    else:
        with ThreadPoolExecutor(max_workers=8) as pool:
            found = list(pool.map(one, tags))
    return [t for t in found if t is not None]


def tagged(registries: Registries, *, repository: Reference) -> list[Tagged]:
    """Every tag of the repository with its manifest."""
    return fetch(registries, repository=repository, tags=tag_names(registries, repository=repository))


def info_of(repository: Reference, item: Tagged) -> CheckpointInfo:
    lineage = item.parsed.lineage()
    step = lineage.step
    match = STEP_TAG.match(item.tag)
    if step is None and match:
        step = int(match.group(1))
    return CheckpointInfo(
        tag=item.tag,
        digest=item.parsed.digest,
        ref=str(repository.with_tag(item.tag).with_digest(item.parsed.digest)),
        step=step,
        run_id=lineage.run_id,
        metrics=dict(lineage.metrics),
        created=item.parsed.created,
        name=item.parsed.annotations.get(A_NAME),
        layout=item.parsed.annotations.get(A_LAYOUT),
    )


def _order(info: CheckpointInfo) -> tuple[int, int, str]:
    return (-1 if info.step is None else info.step, 1 if STEP_TAG.match(info.tag) else 0, info.tag)


def list_checkpoints(registries: Registries, *, repository: Reference) -> list[CheckpointInfo]:
    """The checkpoint artifacts tagged in a repository, sorted by step (no step first)."""
    infos = [info_of(repository, t) for t in tagged(registries, repository=repository) if t.parsed.kind == KIND]
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
        info_of(repository, t) for t in fetch(registries, repository=repository, tags=others) if t.parsed.kind == KIND
    ]
    for _, name in numbered:
        items = fetch(registries, repository=repository, tags=[name])
        if items and items[0].parsed.kind == KIND:
            found.append(info_of(repository, items[0]))
            break
    with_step = sorted((i for i in found if i.step is not None), key=_order)
    return with_step[-1] if with_step else None
