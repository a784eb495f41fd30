"""What a rollout serves, pinned by digest: the release (a model artifact) and the serving image."""

from __future__ import annotations

from trainops.errors import InputError, NotFoundError
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.spec import Manifest


def resolve_release(registries: Registries, text: str) -> str:
    """The release `text` names, scheme-qualified and pinned: `<repo>[:tag]@sha256:…`.

    Any model artifact resolves (artifactType application/vnd.cncf.model.manifest.v1+json);
    a reference to something else is refused, one that does not exist is NotFoundError.
    """
    from trainops.registry.store import resolve

    if not text or not text.strip():
        raise InputError("no release given", hint="name the release to serve: REPOSITORY:TAG or …@sha256:…")
    ref = registries.ref(text)
    try:
        found = resolve(registries, ref=ref)
    except NotFoundError:
        raise NotFoundError(
            f"release {text} does not exist ({ref})", hint="check the tag with `trainops registry ls`"
        ) from None
    if found.parsed.artifact_type != media.MODEL_ARTIFACT:
        kind = found.parsed.kind
        raise InputError(
            f"{text} is a {kind} artifact, not a model release (artifactType {found.parsed.artifact_type})",
            hint="serve a release published by `trainops release` (or pushed with --kind model)",
        )
    return str(found.ref)


def serving_repository(manifest: Manifest) -> str:
    """rollout.image.repository, else <registry>/<pipeline>/serve-<engine>."""
    spec = manifest.pipeline.spec
    rollout = spec.rollout
    assert rollout is not None
    override = rollout.image.repository if rollout.image else None
    return spec.repository(manifest.pipeline.metadata.name, f"serve-{rollout.engine}", override)


def resolve_image(manifest: Manifest, registries: Registries, *, image: str | None) -> str:
    """The serving image as pods name it (host/repository@sha256:…): `image` (a tag is resolved
    now), else rollout.pinnedImage, else the image built for this git commit in the serving
    repository."""
    from trainops.build.api import base_reference
    from trainops.gitinfo import git_state
    from trainops.registry.store import resolve
    from trainops.render.image import cluster_image

    rollout = manifest.pipeline.spec.rollout
    image = image or (rollout.pinned_image if rollout is not None else None)
    if image:
        ref = base_reference(image, registries)
        if ref.digest:
            return cluster_image(ref)
        try:
            return cluster_image(resolve(registries, ref=ref).ref)
        except NotFoundError:
            raise NotFoundError(f"serving image {image} is not in its registry", hint="push it, or pin it") from None
    repository = serving_repository(manifest)
    git = git_state(manifest.root)
    if git is None:
        raise InputError(
            f"{manifest.root} is not in a git repository, so the serving image cannot be found by its commit",
            hint="pass --image NAME@sha256:…",
        )
    try:
        return cluster_image(resolve(registries, ref=registries.ref(repository).with_tag(git.commit)).ref)
    except NotFoundError:
        raise NotFoundError(
            f"no serving image for commit {git.commit[:12]} in {repository}",
            hint="build it from the serve template (trainops image build), or pass --image NAME@sha256:…",
        ) from None
