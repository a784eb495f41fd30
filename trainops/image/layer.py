"""The layer builder: no engine, no build steps — the project's code appended as one
reproducible layer onto a base image already in a trainops registry (as ko and jib do).

The layer holds the template's support files under /opt/trainops (the entrypoint and its
hook directory) and the selected context files under the template's working directory.
It is an **uncompressed** tar (`application/vnd.oci.image.layer.v1.tar`) written by
trainops.image.context: sorted entries, fixed mtimes, owner 0:0, normalised modes. Not
gzip, because gzip output depends on the zlib build (zlib and zlib-ng, different levels)
and "same inputs, same digest on any machine" must not; a code layer is small, so
compression saves little, and its digest is then also its diff_id.

The new config is the base's with: the layer's diff_id appended to rootfs, one history
entry, the template's environment merged into Env, its working directory, entrypoint and
command, the base's user (or the template's non-root uid when the base sets none), and the
labels; `created` is the commit time. Base layers keep their bytes and digests; Docker
media types are written as their OCI equivalents.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trainops.image.context import PORTABLE_MTIME, HashingWriter, Member, Selection, members_of, write_tar
from trainops.image.image import OCI_CONFIG, OCI_LAYER, Image, as_oci_layer, oci_manifest
from trainops.image.templates import SUPPORT_DEST, Profile, Rendered, SupportFile
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import Descriptor, ManifestData, sha256_digest
from trainops.serialize import to_data

LAYER_FORMAT = "tar, pax, uncompressed; mtime 2000-01-01; owner 0:0; modes 0644/0755"
RECIPE_VERSION = 1


def recipe(rendered: Rendered) -> dict[str, Any]:
    """What the layer builder does, for the inputs digest (it runs no Dockerfile)."""
    return {
        "kind": "layer",
        "version": RECIPE_VERSION,
        "template": rendered.template,
        "profile": to_data(rendered.profile),
        "layer": LAYER_FORMAT,
        "mtime": PORTABLE_MTIME,
    }


def layer_members(selection: Selection, support: list[SupportFile], workdir: str) -> list[Member]:
    members = [
        Member(f"{SUPPORT_DEST}/{f.relpath}", "file", f.mode, source=f.source, size=f.source.stat().st_size)
        for f in support
    ]
    return members + members_of(selection, workdir.strip("/"))


@dataclass(frozen=True)
class Layer:
    path: Path  # the tar, in a temporary directory
    digest: str  # also the diff_id: the layer is not compressed
    size: int

    @property
    def descriptor(self) -> Descriptor:
        return Descriptor(OCI_LAYER, self.digest, self.size)


@contextmanager
def written_layer(members: list[Member], staging: Path) -> Iterator[Layer]:
    """Write the layer tar to a temporary file; it is removed when the block ends."""
    staging.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=staging, prefix="layer-", suffix=".tar")
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            writer = HashingWriter(fh)
            write_tar(members, writer)  # type: ignore[arg-type]
            fh.flush()
        yield Layer(path, writer.digest, writer.size)
    finally:
        path.unlink(missing_ok=True)


def _merge_env(base: list[str], extra: tuple[tuple[str, str], ...]) -> list[str]:
    out = list(base)
    for key, value in extra:
        entry = f"{key}={value}"
        for i, existing in enumerate(out):
            if existing.split("=", 1)[0] == key:
                out[i] = entry
                break
        else:
            out.append(entry)
    return out


def new_config(
    base: Image,
    *,
    profile: Profile,
    labels: dict[str, str],
    created: str,
    layer_digest: str,
    history: str,
) -> bytes:
    cfg = copy.deepcopy(base.config)
    for stale in ("container", "container_config", "parent", "id", "docker_version"):
        cfg.pop(stale, None)
    run: dict[str, Any] = cfg.setdefault("config", {}) or {}
    cfg["config"] = run
    run["Env"] = _merge_env(list(run.get("Env") or []), profile.env)
    run["WorkingDir"] = profile.workdir
    run["Entrypoint"] = list(profile.entrypoint)
    if profile.cmd:
        run["Cmd"] = list(profile.cmd)
    else:
        run.pop("Cmd", None)  # a new entrypoint drops the base's command, as in a Dockerfile
    if not str(run.get("User") or ""):
        run["User"] = profile.user  # the base decides who runs; if it does not, not root
    if profile.ports:
        ports = dict(run.get("ExposedPorts") or {})
        ports.update({f"{p}/tcp": {} for p in profile.ports})
        run["ExposedPorts"] = ports
    merged = dict(run.get("Labels") or {})
    merged.update(labels)
    run["Labels"] = merged
    cfg["created"] = created
    rootfs = cfg.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    rootfs["diff_ids"] = [*list(rootfs.get("diff_ids") or []), layer_digest]
    cfg["history"] = [*list(cfg.get("history") or []), {"created": created, "created_by": history}]
    return canonical_json(cfg)


def assemble(
    base: Image,
    layer: Layer,
    *,
    profile: Profile,
    labels: dict[str, str],
    annotations: dict[str, str],
    created: str,
    history: str,
) -> tuple[bytes, ManifestData]:
    """The new config blob and the OCI manifest of base + layer."""
    config = new_config(
        base, profile=profile, labels=labels, created=created, layer_digest=layer.digest, history=history
    )
    descriptor = Descriptor(OCI_CONFIG, sha256_digest(config), len(config))
    layers = [as_oci_layer(d) for d in base.layers] + [layer.descriptor]
    return config, oci_manifest(descriptor, layers, annotations)


def open_layer(layer: Layer) -> Callable[[], BinaryIO]:
    return lambda: layer.path.open("rb")


def config_summary(config: bytes) -> dict[str, Any]:
    """The parts of a config a user checks: entrypoint, cmd, workdir, user, env."""
    run = json.loads(config).get("config") or {}
    return {k: run.get(k) for k in ("Entrypoint", "Cmd", "WorkingDir", "User", "Env")}
