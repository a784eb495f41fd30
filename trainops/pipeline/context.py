"""What every stage of a run needs from the manifest: the train section, the pinned training
image, and a run id (registries: `Registries.for_manifest`; the checkpoint repository:
`trainops.checkpoint.catalog.checkpoint_repository`)."""

from __future__ import annotations

import secrets
import time

from trainops.errors import InputError, NotFoundError
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.render.image import cluster_image as cluster_image
from trainops.render.names import check_run_id as check_run_id
from trainops.spec import Manifest
from trainops.spec.stages import TrainSpec


def train_spec(manifest: Manifest) -> TrainSpec:
    train = manifest.pipeline.spec.train
    if train is None:
        raise InputError(f"{manifest.path} has no train section", hint="add spec.train (command, scheduler, nodes)")
    return train


def new_run_id(prefix: str = "run") -> str:
    """A fresh run id: DNS-label safe, sortable by time, unique across machines."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def resolve_image(manifest: Manifest, registries: Registries, *, image: str | None = None) -> Reference:
    """The training image pinned to a digest.

    In order: `image` (a reference, e.g. --image), train.image, else the image the manifest's
    image section builds, found by its git-commit tag in the image repository. A tag is
    resolved in its registry, so what runs is what was pushed at this moment.
    """
    from trainops.build.api import base_reference, target_repository
    from trainops.gitinfo import git_state
    from trainops.registry.store import resolve

    text = image or train_spec(manifest).image
    if text:
        ref = base_reference(text, registries)
        if ref.digest:
            return ref
        try:
            return resolve(registries, ref=ref).ref
        except NotFoundError as err:
            raise NotFoundError(
                f"image {text} is not in its registry ({err})", hint="push it, or pin it as name@sha256:…"
            ) from None
    target = target_repository(manifest, registries)
    git = git_state(manifest.root)
    if git is None:
        raise InputError(
            f"{manifest.root} is not in a git repository, so the built image cannot be found by its commit",
            hint="pass --image NAME@sha256:… or set train.image",
        )
    try:
        return resolve(registries, ref=target.with_tag(git.commit)).ref
    except NotFoundError:
        raise NotFoundError(
            f"no image for commit {git.commit[:12]} in {target.repo_url}",
            hint="build it first (trainops image build --push), or pass --image NAME@sha256:…",
        ) from None
