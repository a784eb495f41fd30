"""What a rollout serves, pinned by digest: the release (a model artifact) and the serving image."""

from __future__ import annotations

from trainops.errors import InputError, NotFoundError
from trainops.image.pinned import image_for_commit, pin_image
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.render.image import cluster_image


def resolve_release(registries: Registries, text: str) -> str:
    """The release `text` names, scheme-qualified and pinned: `<repo>[:tag]@sha256:…`.

    Any model artifact resolves (a ModelPack model of either namespace: trainops' releases,
    modctl's models);
    a reference to something else is refused, one that does not exist is NotFoundError.
    """
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    if not text or not text.strip():
        raise InputError("no release given", hint="name the release to serve: REPOSITORY:TAG or …@sha256:…")
    ref = registries.ref(text)
    try:
        found = resolve(registries, ref=ref)
    except NotFoundError:
        raise NotFoundError(
            f"release {text} does not exist ({ref})", hint="check the tag with `trainops registry ls`"
        ) from None
    if found.parsed.kind != "model":  # a ModelPack model of either namespace (modctl's too)
        kind = found.parsed.kind
        raise InputError(
            f"{text} is a {kind} artifact, not a model release (artifactType {found.parsed.artifact_type})",
            hint="serve a release published by `trainops release` (or pushed with --kind model)",
        )
    return str(found.ref)


def newest_release(manifest: Manifest, registries: Registries) -> str:
    """The newest release of the manifest's release.repository, pinned (what `rollout start`
    serves when it is given none, as `release create` releases release.source)."""
    from trainops.release import list_releases, release_repository  # lazy: loads sqlite3, concurrent.futures

    repository = release_repository(manifest, registries)
    found = list_releases(registries, repository=repository)
    if not found:
        raise NotFoundError(
            f"no release in {repository.repo_url} to serve", hint="`trainops release create` makes one, or name RELEASE"
        )
    return found[0].ref


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

    rollout = manifest.pipeline.spec.rollout
    image = image or (rollout.pinned_image if rollout is not None else None)
    if image:
        return cluster_image(pin_image(registries, image, what="serving image"))
    pinned = image_for_commit(
        registries,
        repository=registries.ref(serving_repository(manifest)),
        root=manifest.root,
        what="serving image",
        build_hint="build it from the serve template (trainops image build)",
    )
    return cluster_image(pinned)
