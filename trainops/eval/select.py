"""Which checkpoint a word names: `latest`, `best` (by train.checkpoint.keep.metric/mode),
or a reference — resolved to a pinned checkpoint in the registry."""

from __future__ import annotations

from trainops.checkpoint.catalog import best_checkpoint, checkpoint_repository, latest_checkpoint
from trainops.errors import InputError, NotFoundError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.reference import TAG_RE
from trainops.registry.store import Resolved, resolve

WORDS = ("latest", "best")


def ranking(manifest: Manifest) -> tuple[str, str]:
    """(metric, mode) that ranks checkpoints: train.checkpoint.keep.metric and mode."""
    train = manifest.pipeline.spec.train
    metric = train.checkpoint.keep.metric if train is not None else None
    if not metric or train is None:
        raise InputError(
            "`best` needs a metric to rank checkpoints", hint="set train.checkpoint.keep.metric, or name a checkpoint"
        )
    return metric, train.checkpoint.keep.mode


def resolve_checkpoint(registries: Registries, *, manifest: Manifest, which: str) -> Resolved:
    """The checkpoint `which` names, pinned: latest, best, a tag of the checkpoint repository
    (step-300), or a reference (REPO:TAG, REPO@sha256:…)."""
    if which not in WORDS:
        if TAG_RE.match(which) and ":" not in which:  # a bare tag: of the checkpoint repository
            return resolve(registries, ref=checkpoint_repository(registries, manifest=manifest).with_tag(which))
        ref = registries.ref(which)
        if not ref.tag and not ref.digest:
            raise InputError(f"{which} names no checkpoint", hint="write REPO:step-N, REPO@sha256:…, latest or best")
        return resolve(registries, ref=ref)
    repository = checkpoint_repository(registries, manifest=manifest)
    if which == "latest":
        found = latest_checkpoint(registries, repository=repository)
    else:
        metric, mode = ranking(manifest)
        found = best_checkpoint(registries, repository=repository, metric=metric, mode=mode)
    if found is None:
        raise NotFoundError(
            f"no {which} checkpoint in {repository.repo_url}",
            hint="train first (checkpoints are pushed as they land), or name a checkpoint reference",
        )
    return resolve(registries, ref=registries.ref(found.ref))
