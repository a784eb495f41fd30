"""OCI images through the trainops registry: resolve a platform's manifest, read its config,
copy blobs between repositories, write blobs and manifests, and look up tags.

Docker v2 manifests and manifest lists are read as well as OCI ones; what trainops writes
is always OCI (a Docker layer's bytes are the same blob under the OCI media type).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainops.errors import InputError, IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import Backend, Descriptor, ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
IMAGE_CONFIGS = (OCI_CONFIG, DOCKER_CONFIG)
# Distributable layers only: non-distributable ("foreign") layers live outside the registry.
TO_OCI_LAYER = {
    DOCKER_LAYER_GZIP: OCI_LAYER_GZIP,
    OCI_LAYER: OCI_LAYER,
    OCI_LAYER_GZIP: OCI_LAYER_GZIP,
    OCI_LAYER_ZSTD: OCI_LAYER_ZSTD,
}
MAX_CONFIG_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Platform:
    os: str
    architecture: str
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> Platform:
        parts = text.split("/")
        return cls(parts[0], parts[1], parts[2] if len(parts) > 2 else None)

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    def matches(self, os_name: str | None, arch: str | None, variant: str | None) -> bool:
        if (os_name, arch) != (self.os, self.architecture):
            return False
        return self.variant is None or variant in (None, self.variant)


@dataclass(frozen=True)
class Image:
    """A container image in a repository: its manifest, parsed, and its config."""

    ref: Reference  # pinned to the platform manifest's digest
    manifest: ManifestData
    config_descriptor: Descriptor
    layers: list[Descriptor]
    config_bytes: bytes

    @property
    def config(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.config_bytes)
        return data

    @property
    def digest(self) -> str:
        return self.manifest.digest


def _body(manifest: ManifestData, shown: str) -> dict[str, Any]:
    try:
        body = json.loads(manifest.data)
    except ValueError:
        raise IntegrityError(f"{shown}: the manifest is not JSON") from None
    if not isinstance(body, dict):
        raise IntegrityError(f"{shown}: the manifest is not a JSON object")
    return body


def _media_type(manifest: ManifestData, body: dict[str, Any]) -> str:
    return str(body.get("mediaType") or manifest.media_type or "")


def resolve_image(registries: Registries, ref: Reference, platform: Platform) -> Image:
    """The image ref names for platform: its manifest (from an index if need be) and config."""
    backend = registries.backend(ref)
    target = ref.target or "latest"
    manifest = backend.get_manifest(ref.repository, target)
    if ref.digest and manifest.digest != ref.digest:
        raise IntegrityError(f"{ref}: the registry returned manifest {manifest.digest}")
    body = _body(manifest, str(ref))
    kind = _media_type(manifest, body)
    if kind in (media.OCI_INDEX, media.DOCKER_MANIFEST_LIST) or "manifests" in body:
        child = _pick_platform(body, platform, str(ref))
        manifest = backend.get_manifest(ref.repository, child)
        body = _body(manifest, f"{ref}@{child}")
        kind = _media_type(manifest, body)
    if kind not in (media.OCI_MANIFEST, media.DOCKER_MANIFEST):
        raise InputError(f"{ref} is not a container image (manifest type {kind or 'unknown'})")
    try:
        config = Descriptor.from_oci(body["config"])
        layers = [Descriptor.from_oci(d) for d in body.get("layers") or []]
    except (KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{ref}: malformed image manifest ({err})") from None
    if config.media_type not in IMAGE_CONFIGS:
        raise InputError(
            f"{ref} is not a container image: its config is {config.media_type}",
            hint="the layer builder needs a base image (an OCI or Docker image), not an artifact",
        )
    for layer in layers:
        if layer.media_type not in TO_OCI_LAYER:
            raise InputError(
                f"{ref}: layer {layer.digest[:19]} has the media type {layer.media_type}, which the layer builder "
                "cannot carry over",
                hint="use a base whose layers are OCI or Docker tar layers (not non-distributable ones)",
            )
    if config.size > MAX_CONFIG_BYTES:
        raise IntegrityError(f"{ref}: its config claims {config.size} bytes; refusing to read it")
    with backend.open_blob(ref.repository, config.digest) as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if sha256_digest(data) != config.digest:
        raise IntegrityError(f"{ref}: config blob {config.digest[:19]} does not match its digest")
    image = Image(ref.with_digest(manifest.digest), manifest, config, layers, data)
    cfg = _config_object(data, str(ref))
    found = f"{cfg.get('os')}/{cfg.get('architecture')}" + (f"/{cfg['variant']}" if cfg.get("variant") else "")
    if not platform.matches(cfg.get("os"), cfg.get("architecture"), cfg.get("variant")):
        raise InputError(
            f"{ref} is a {found} image, not {platform}", hint=f"set image.platform: {found}, or use a {platform} base"
        )
    rootfs = cfg.get("rootfs") or {}
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(layers):
        raise IntegrityError(f"{ref}: its config lists a different number of layers than its manifest")
    return image


def _config_object(data: bytes, shown: str) -> dict[str, Any]:
    """An image config: a JSON object (whoever pushed the base wrote it; check before use)."""
    try:
        cfg = json.loads(data)
    except ValueError:
        raise IntegrityError(f"{shown}: its image config is not JSON") from None
    if not isinstance(cfg, dict):
        raise IntegrityError(f"{shown}: its image config is not a JSON object")
    return cfg


def _pick_platform(index: dict[str, Any], platform: Platform, shown: str) -> str:
    seen: list[str] = []
    candidates: list[tuple[int, str]] = []
    entries = index.get("manifests") or []
    if not isinstance(entries, list):
        raise IntegrityError(f"{shown}: the image index's manifests are not a list")
    for entry in entries:
        try:
            child = Descriptor.from_oci(entry)
        except ValueError as err:
            raise IntegrityError(f"{shown}: malformed image index entry ({err})") from None
        plat = entry.get("platform") or {}
        if not isinstance(plat, dict):
            raise IntegrityError(f"{shown}: index entry {child.digest[:19]} has a platform that is not an object")
        if child.annotations.get("vnd.docker.reference.type") == "attestation-manifest":
            continue
        seen.append("/".join(str(p) for p in (plat.get("os"), plat.get("architecture"), plat.get("variant")) if p))
        if platform.matches(plat.get("os"), plat.get("architecture"), plat.get("variant")):
            exact = 0 if plat.get("variant") == platform.variant else 1
            candidates.append((exact, child.digest))
    if not candidates:
        raise NotFoundError(
            f"{shown} has no {platform} image", hint=f"it has {', '.join(sorted(set(seen))) or 'no platforms'}"
        )
    return sorted(candidates)[0][1]


# -- writing ------------------------------------------------------------------------------


def oci_manifest(config: Descriptor, layers: list[Descriptor], annotations: dict[str, str]) -> ManifestData:
    body: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": config.as_oci(),
        "layers": [layer.as_oci() for layer in layers],
    }
    if annotations:
        body["annotations"] = dict(sorted(annotations.items()))
    data = canonical_json(body)
    return ManifestData(data=data, media_type=media.OCI_MANIFEST, digest=sha256_digest(data))


def as_oci_layer(layer: Descriptor) -> Descriptor:
    """The same blob described with the OCI media type."""
    return Descriptor(TO_OCI_LAYER[layer.media_type], layer.digest, layer.size, dict(layer.annotations))


def ensure_blobs(
    registries: Registries,
    *,
    src: Reference,
    dst: Reference,
    blobs: list[Descriptor],
    progress: Callable[[str, int], Callable[[int], None]],
) -> tuple[int, int]:
    """Make the base's blobs present in dst (the Store's copy_blobs). Returns (moved, bytes)."""
    from trainops.registry.store import copy_blobs  # lazy: loads tempfile, sqlite3

    class _Sink:
        def add(self, name: str, total: int) -> Callable[[int], None]:
            return progress(f"base {name[7:19]}", total)

    moved, _, nbytes = copy_blobs(registries, src=src, dst=dst, blobs=blobs, progress=_Sink(), jobs=4)
    return moved, nbytes


def find_tag(backend: Backend, repo: str, tag: str) -> ManifestData | None:
    """The manifest a tag names, or None when the tag (or the repository) does not exist."""
    try:
        return backend.get_manifest(repo, tag)
    except NotFoundError:
        return None


def put_tags(backend: Backend, repo: str, manifest: ManifestData, tags: list[str]) -> None:
    """Store the manifest once per tag (the first call also stores it); blobs are in place."""
    for tag in tags:
        backend.put_manifest(repo, manifest, tag=tag)
