"""The one resolver of "the image to run": an image the user names (a digest is taken as
written, a tag is resolved now, so what runs is what was pushed at this moment), or, with
none named, the image `trainops image build --push` built for the project's git commit
(tagged with the commit in its image repository). The training image, the eval Job's and
the serving image are all found this way."""

from __future__ import annotations

from pathlib import Path

from trainops.errors import InputError, NotFoundError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference


def pin_image(registries: Registries, text: str, *, what: str = "image") -> Reference:
    """The image `text` names, pinned to its digest (a tag is resolved in its registry now)."""
    from trainops.image.api import base_reference  # lazy: loads tarfile, sqlite3
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    ref = base_reference(text, registries)
    if ref.digest:
        return ref
    try:
        return resolve(registries, ref=ref).ref
    except NotFoundError as err:
        raise NotFoundError(
            f"{what} {text} is not in its registry ({err})", hint="push it, or pin it as name@sha256:…"
        ) from None


def image_for_commit(
    registries: Registries, *, repository: Reference, root: Path, what: str = "image", build_hint: str
) -> Reference:
    """The image built for the git commit of the working tree at `root`, pinned."""
    from trainops.gitinfo import git_state  # lazy: loads subprocess
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    git = git_state(root)
    if git is None:
        raise InputError(
            f"{root} is not in a git repository, so the {what} cannot be found by its commit",
            hint="pass --image NAME@sha256:…",
        )
    try:
        return resolve(registries, ref=repository.with_tag(git.commit)).ref
    except NotFoundError:
        raise NotFoundError(
            f"no {what} for commit {git.commit[:12]} in {repository.repo_url}",
            hint=f"{build_hint}, or pass --image NAME@sha256:…",
        ) from None


def training_image(manifest: Manifest, registries: Registries, *, image: str | None = None) -> Reference:
    """The training image pinned to a digest: `image` (--image), else train.image, else the
    image the manifest's image section builds, found by its git-commit tag."""
    from trainops.image.api import target_repository  # lazy: loads tarfile, sqlite3

    train = manifest.pipeline.spec.train
    text = image or (train.image if train is not None else None)
    if text:
        return pin_image(registries, text)
    return image_for_commit(
        registries,
        repository=target_repository(manifest, registries),
        root=manifest.root,
        build_hint="build it first (trainops image build --push)",
    )
