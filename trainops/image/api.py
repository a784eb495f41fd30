"""`trainops image render` and `trainops image build`: the manifest's image section, built.

    render_image(manifest)                      the Dockerfile the docker builder would build
    build_image(manifest, builder=…, push=…)    build (or reuse) the image, tag and push it

A build computes the inputs digest first (trainops.image.inputs); when the target
repository already has its `inputs-<hex>` tag, nothing is built: the existing image is
reused and, with --push, the commit tag is pointed at it. Otherwise:

- docker: the rendered Dockerfile plus the selected context go to the engine at
  DOCKER_HOST; with --push the image goes to oci:// registries through the engine, and to
  file:// or s3:// registries through trainops (exported from the engine, stored as OCI).
  Without --push it stays in the engine, tagged `<repository>:<tag>`.
- layer: the code layer is appended to the base image read from the trainops registry;
  with --push the base's blobs are mounted or copied into the target repository, then the
  layer, config and manifest are written. Without --push nothing is written: the result
  names the digest the push would produce.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.errors import InputError
from trainops.image import layer as layer_builder
from trainops.image.archive import import_archive
from trainops.image.context import Member, Selection, hash_entries, members_of, select_context
from trainops.image.engine import Engine
from trainops.image.image import (
    Image,
    Platform,
    ensure_blobs,
    find_tag,
    put_tags,
    resolve_image,
)
from trainops.image.inputs import (
    Provenance,
    check_user_labels,
    image_labels,
    image_tags,
    inputs_digest,
    lineage,
    manifest_annotations,
    provenance,
)
from trainops.image.secrets import available_values, check_not_baked, read_secret
from trainops.image.templates import Rendered, SupportFile, own_dockerfile, render, support_files
from trainops.manifest import Manifest
from trainops.manifest.stages import ImageSpec
from trainops.registry.backends.base import Backend, BlobSource, ManifestData
from trainops.registry.context import NullProgress, ProgressSink, Registries
from trainops.registry.digestcache import cache_dir, hash_file
from trainops.registry.lineage_data import Parent
from trainops.registry.reference import Reference
from trainops.registry.store import bytes_source, leased, upload_if_missing

Log = Callable[[str], None]
BUILDERS = ("docker", "layer")
SECRET_FILE_PREFIX = ".trainops-secret-"


def _silent(_: str) -> None:
    return None


@dataclass
class BuildResult:
    builder: str
    template: str
    repository: str  # the target repository (oci://…, file://…, s3://…)
    tags: list[str]  # the inputs tag, then the commit tag (if in a git repository)
    inputs_digest: str
    base: str
    base_digest: str  # manifest digest (layer) or engine image id (docker)
    commit: str | None
    created: str
    skipped: bool  # the inputs tag existed: nothing was built
    pushed: bool
    digest: str | None  # manifest digest in the registry; None for an unpushed docker build
    image_id: str | None  # config digest (the engine's image id)
    local_image: str | None = None  # the engine's name of the image (docker builder)
    refs: list[str] = field(default_factory=list)  # every reference written (or that --push would write)
    secrets_used: list[str] = field(default_factory=list)
    secrets_ignored: list[str] = field(default_factory=list)
    files: int = 0
    context_bytes: int = 0
    layer_bytes: int | None = None
    blobs_copied: int = 0
    seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)  # what the build wrote (none when skipped)
    notes: list[str] = field(default_factory=list)


def _image_spec(manifest: Manifest) -> ImageSpec:
    image = manifest.pipeline.spec.image
    if image is None:
        raise InputError(
            f"{manifest.path} has no image section", hint="add spec.image (template, builder, base, context)"
        )
    return image


def render_image(manifest: Manifest) -> Rendered:
    """The rendered template of the manifest's image section, or its own image.dockerfile."""
    image = _image_spec(manifest)
    if image.dockerfile is None:
        return render(image)

    path = manifest.local_path(image.dockerfile).resolve()
    if not path.is_relative_to(manifest.root.resolve()):
        raise InputError(
            f"image.dockerfile {image.dockerfile} is outside {manifest.root}",
            hint="keep the Dockerfile in the project",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(
            f"image.dockerfile {image.dockerfile}: cannot read it ({type(err).__name__})",
            hint="check the path (relative to trainops.yaml)",
        ) from None
    return own_dockerfile(image, text=text, name=image.dockerfile)


def target_repository(manifest: Manifest, registries: Registries) -> Reference:
    """image.repository, else <spec.registry>/<metadata.name>/image (as `trainops plan` shows)."""
    spec = manifest.pipeline.spec
    image = _image_spec(manifest)
    text = spec.repository(manifest.pipeline.metadata.name, "image", image.repository)
    ref = registries.ref(text)
    if ref.tag or ref.digest:
        raise InputError(
            f"image.repository {text!r} names a tag or digest", hint="name the repository only; trainops picks the tags"
        )
    return ref


def base_reference(text: str, registries: Registries) -> Reference:
    """The layer builder's base as a trainops reference.

    A scheme is taken as written; `host[:port]/repo…` (a first component with a dot, a
    colon or `localhost`, as Docker reads references) is an oci:// registry; anything
    else is completed by spec.registry.
    """
    if "://" in text:
        return registries.ref(text)
    first, slash, _ = text.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return registries.ref(f"oci://{text}")
    return registries.ref(text)


def portable_ref(ref: Reference, registries: Registries) -> str:
    """ref as recorded in an image: relative to spec.registry when it lives there.

    A file:// reference holds an absolute path of this machine; written into labels it
    would make the same inputs give another digest elsewhere. Relative to the manifest's
    registry it is the same everywhere, and `Registries.ref` completes it again.
    """
    text = str(ref.with_digest(None))
    if registries.default_registry:
        root = registries.root().url.rstrip("/")
        if text.startswith(root + "/"):
            return text[len(root) + 1 :]
    return text


@dataclass
class _Inputs:
    manifest: Manifest
    image: ImageSpec
    rendered: Rendered
    prov: Provenance
    selection: Selection
    support: list[SupportFile]
    support_digests: dict[str, str]
    registries: Registries
    target: Reference
    log: Log
    progress: ProgressSink

    @property
    def name(self) -> str:
        return self.manifest.pipeline.metadata.name

    def digest(self, builder: str, recipe: dict[str, Any], base_digest: str) -> str:
        return inputs_digest(
            builder=builder,
            recipe=recipe,
            selection=self.selection,
            support=self.support,
            support_digests=self.support_digests,
            build_args=dict(self.image.build_args),
            base_digest=base_digest,
            platform=self.image.platform,
            labels=dict(self.image.labels),
            secret_ids=[s.id for s in self.image.secrets],
        )

    def result(
        self, builder: str, inputs_hex: str, tags: list[str], base: str, base_digest: str, **kw: Any
    ) -> BuildResult:
        return BuildResult(
            builder=builder,
            template=self.rendered.template,
            repository=self.target.repo_url,
            tags=tags,
            inputs_digest=inputs_hex,
            base=base,
            base_digest=base_digest,
            commit=self.prov.commit,
            created=self.prov.created,
            files=len(self.selection.entries),
            context_bytes=self.selection.total_bytes,
            **kw,
        )


def build_image(
    manifest: Manifest,
    *,
    builder: str | None = None,
    push: bool = False,
    insecure: bool = False,
    log: Log | None = None,
    progress: ProgressSink | None = None,
) -> BuildResult:
    """Build the manifest's image with the docker or layer builder (or reuse it); see the module doc."""
    started = time.monotonic()
    image = _image_spec(manifest)
    kind = builder or image.builder
    if kind not in BUILDERS:
        raise InputError(f"unknown builder {kind!r}", hint="use docker or layer")
    if kind == "layer" and image.dockerfile is not None:
        raise InputError("the layer builder runs no Dockerfile (image.dockerfile)", hint="use --builder docker")
    rendered = render_image(manifest)
    check_user_labels(dict(image.labels))
    context_root = manifest.local_path(image.context)
    selection = hash_entries(
        select_context(context_root, include=image.include, exclude=image.exclude, manifest=manifest.path)
    )
    values = available_values(list(image.secrets), manifest.root)
    check_not_baked(list(image.secrets), values, manifest.root, selection)
    support = support_files()
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        inputs = _Inputs(
            manifest=manifest,
            image=image,
            rendered=rendered,
            prov=provenance(context_root),
            selection=selection,
            support=support,
            support_digests={f.relpath: hash_file(f.source) for f in support},
            registries=registries,
            target=target_repository(manifest, registries),
            log=log or _silent,
            progress=progress or NullProgress(),
        )
        result = _build_layer(inputs, push) if kind == "layer" else _build_docker(inputs, push)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _staging() -> Path:
    return cache_dir() / "build"


# -- layer ---------------------------------------------------------------------------------


def _build_layer(inputs: _Inputs, push: bool) -> BuildResult:
    image, rendered, prov = inputs.image, inputs.rendered, inputs.prov
    if image.base is None:
        raise InputError(
            "the layer builder appends to a base image: set image.base",
            hint="a base already in a registry, such as base/pytorch:2.5 (completed by spec.registry) or "
            "oci://host/base/pytorch:2.5",
        )
    registries, target = inputs.registries, inputs.target
    base_ref = base_reference(image.base, registries)
    base = resolve_image(registries, base_ref, Platform.parse(image.platform))
    digest = inputs.digest("layer", layer_builder.recipe(rendered), base.digest)
    tags = image_tags(digest, prov)
    base_shown = portable_ref(base_ref, registries)
    line = lineage(inputs.name, prov, [Parent(digest=base.digest, ref=base_shown, relation="derived-from")])
    labels = image_labels(user=dict(image.labels), prov=prov, line=line, digest=digest, pipeline=inputs.name)
    ignored = [s.id for s in image.secrets]
    notes = [f"secrets {', '.join(ignored)} are not used: the layer builder runs no build steps"] if ignored else []
    backend = registries.backend(target)
    refs = [str(target.with_tag(t)) for t in tags]
    common: dict[str, Any] = {"refs": refs, "secrets_ignored": ignored, "notes": notes}
    existing = find_tag(backend, target.repository, tags[0])
    if existing is not None:
        if push:
            put_tags(backend, target.repository, existing, tags[1:])
        return inputs.result(
            "layer",
            digest,
            tags,
            base_shown,
            base.digest,
            skipped=True,
            pushed=push,
            digest=existing.digest,
            image_id=_config_digest(existing.data),
            **common,
        )
    members = layer_builder.layer_members(inputs.selection, inputs.support, rendered.profile.workdir)
    history = (
        f"trainops image build --builder layer: {rendered.template} profile, context to {rendered.profile.workdir}"
    )
    with layer_builder.written_layer(members, _staging()) as lay:
        config, manifest = layer_builder.assemble(
            base,
            lay,
            profile=rendered.profile,
            labels=labels,
            annotations=manifest_annotations(labels, base_shown, base.digest),
            created=prov.created,
            history=history,
        )
        copied = _push_layer_image(inputs, base, lay, config, manifest, tags) if push else 0
        return inputs.result(
            "layer",
            digest,
            tags,
            base_shown,
            base.digest,
            skipped=False,
            pushed=push,
            digest=manifest.digest,
            image_id=_config_digest(manifest.data),
            layer_bytes=lay.size,
            blobs_copied=copied,
            labels=labels,
            **common,
        )


def _push_layer_image(
    inputs: _Inputs, base: Image, lay: layer_builder.Layer, config: bytes, manifest: ManifestData, tags: list[str]
) -> int:
    """The base's layers (copied or mounted), the code layer, the config, then the tags; the
    blobs copied from the base's registry."""
    registries, target = inputs.registries, inputs.target
    backend = registries.backend(target)
    with leased(backend, target.repository):  # gc keeps the blobs until the manifest names them
        copied, _ = ensure_blobs(registries, src=base.ref, dst=target, blobs=base.layers, progress=inputs.progress.add)
        upload_if_missing(
            backend,
            target.repository,
            BlobSource(lay.digest, lay.size, path=lay.path),
            inputs.progress.add("code layer", lay.size),
        )
        config_src = bytes_source(config)
        upload_if_missing(backend, target.repository, config_src, inputs.progress.add("config", config_src.size))
        put_tags(backend, target.repository, manifest, tags)
    return copied


def _config_digest(manifest_bytes: bytes) -> str | None:
    try:
        return str(json.loads(manifest_bytes)["config"]["digest"])
    except (ValueError, KeyError, TypeError):
        return None


# -- docker --------------------------------------------------------------------------------


def _local_name(target: Reference, pipeline: str) -> str:
    """The engine's repository name: the registry's for oci://, a local one otherwise."""
    if target.scheme == "oci":
        return f"{target.location}/{target.repository}"
    return f"localhost/trainops/{pipeline}/image"


def _build_docker(inputs: _Inputs, push: bool) -> BuildResult:
    engine = Engine.connect()
    try:
        return _docker_with(engine, inputs, push)
    finally:
        engine.close()


def _docker_with(engine: Any, inputs: _Inputs, push: bool) -> BuildResult:
    """The docker builder: reuse the image its inputs digest names, else build it in the
    engine and, with push, publish it."""
    image, rendered, prov, target = inputs.image, inputs.rendered, inputs.prov, inputs.target
    base_id = engine.ensure_image(rendered.base, inputs.log)
    digest = inputs.digest("docker", {"kind": "dockerfile", "dockerfile": rendered.dockerfile}, base_id)
    tags = image_tags(digest, prov)
    local = _local_name(target, inputs.name)
    line = lineage(inputs.name, prov, [])
    labels = image_labels(user=dict(image.labels), prov=prov, line=line, digest=digest, pipeline=inputs.name)
    declared = [s.id for s in image.secrets]
    used = declared if rendered.uses_secrets else []
    ignored = [] if used else declared
    notes = [f"secrets {', '.join(ignored)} are not used: no step of the template mounts them"] if ignored else []
    backend = inputs.registries.backend(target) if push else None
    refs = [str(target.with_tag(t)) for t in tags] if push else [f"{local}:{t}" for t in tags]
    common: dict[str, Any] = {
        "refs": refs,
        "local_image": f"{local}:{tags[0]}",
        "secrets_used": used,
        "secrets_ignored": ignored,
        "notes": notes,
    }
    reused = _docker_reuse(engine, inputs, backend, local, tags)
    if reused is not None:
        pushed, found_digest, found_id = reused
        return inputs.result(
            "docker", digest, tags, rendered.base, base_id,
            skipped=True, pushed=pushed, digest=found_digest, image_id=found_id, **common,
        )  # fmt: skip
    require_secret_support(engine.kind, f"{engine.host} ({engine.kind} {engine.version})", used)
    members, secret_params = _docker_context(inputs, used)
    image_id = engine.build(
        members,
        tags=[f"{local}:{t}" for t in tags],
        labels=labels,
        build_args=dict(image.build_args),
        platform=image.platform,
        secrets=secret_params,
        timestamp=prov.epoch,
        log=inputs.log,
    )
    pushed_digest = _docker_publish(engine, inputs, backend, local, tags, labels) if backend is not None else None
    return inputs.result(
        "docker", digest, tags, rendered.base, base_id,
        skipped=False, pushed=backend is not None, digest=pushed_digest, image_id=image_id, labels=labels, **common,
    )  # fmt: skip


def _docker_reuse(
    engine: Any, inputs: _Inputs, backend: Backend | None, local: str, tags: list[str]
) -> tuple[bool, str | None, str | None] | None:
    """(pushed, digest, image id) of the image the inputs digest tag already names — in the
    registry when pushing, else in the engine — with the other tags added; None if none."""
    if backend is not None:
        existing = find_tag(backend, inputs.target.repository, tags[0])
        if existing is None:
            return None
        put_tags(backend, inputs.target.repository, existing, tags[1:])
        return True, existing.digest, _config_digest(existing.data)
    local_id = engine.image_id(f"{local}:{tags[0]}")
    if local_id is None:
        return None
    for tag in tags[1:]:
        engine.tag(local_id, local, tag)
    return False, None, local_id


def _docker_publish(
    engine: Any, inputs: _Inputs, backend: Backend, local: str, tags: list[str], labels: dict[str, str]
) -> str | None:
    """Push the engine's image: by the engine to an oci:// registry, else exported and
    imported into the file:// or s3:// repository. Returns the manifest digest."""

    target = inputs.target
    if target.scheme == "oci":
        pushed: str | None = None
        for tag in tags:
            pushed = engine.push(local, tag, inputs.log)
        return pushed
    with leased(backend, target.repository):  # gc keeps the blobs until the manifest names them
        manifest, _config = import_archive(
            engine.export(f"{local}:{tags[0]}"),
            backend=backend,
            repo=target.repository,
            annotations=manifest_annotations(labels, inputs.rendered.base, None),
            staging=_staging(),
            progress=inputs.progress.add,
        )
        put_tags(backend, target.repository, manifest, tags)
    return manifest.digest


def _docker_context(inputs: _Inputs, used: list[str]) -> tuple[list[Member], list[str]]:
    """The context tar's members (Dockerfile, trainops-files/, context/, secrets) and the secret params.

    A Dockerfile of the team's own (image.dockerfile) gets the context at the tar's root, as
    `docker build CONTEXT` gives it, and no trainops support files.
    """
    if inputs.image.dockerfile is not None:
        own = [m for m in members_of(inputs.selection, "") if m.name != "Dockerfile"]
        members = [Member("Dockerfile", "file", 0o644, data=inputs.rendered.dockerfile.encode()), *own]
        return members, _secret_members(inputs, used, members)
    members = [
        Member("Dockerfile", "file", 0o644, data=inputs.rendered.dockerfile.encode()),
        Member("trainops-files", "dir", 0o755),
        Member("context", "dir", 0o755),
    ]
    members += [
        Member(f"trainops-files/{f.relpath}", "file", f.mode, source=f.source, size=f.source.stat().st_size)
        for f in inputs.support
    ]
    members += members_of(inputs.selection, "context")
    return members, _secret_members(inputs, used, members)


def _secret_members(inputs: _Inputs, used: list[str], members: list[Member]) -> list[str]:
    """Append each used secret as a file of the context (never a layer); its build params."""
    params: list[str] = []
    if used:
        for secret in inputs.image.secrets:
            value = read_secret(secret, inputs.manifest.root).value
            name = f"{SECRET_FILE_PREFIX}{uuid.uuid4().hex}"
            members.append(Member(name, "file", 0o600, data=value))
            params.append(f"id={secret.id},src={name}")
    return params


def require_secret_support(kind: str, where: str, used: list[str]) -> None:
    """Refuse a build whose steps mount secrets on an engine whose build API cannot take them."""
    if used and kind != "podman":
        raise InputError(
            f"the build mounts secrets ({', '.join(used)}), which the engine at {where} cannot take over "
            "the Docker API (Docker passes build secrets only in BuildKit sessions)",
            hint="build with Podman's API service (DOCKER_HOST=unix:///run/podman/podman.sock), "
            "or remove image.secrets",
        )
