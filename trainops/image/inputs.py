"""What names an image: its inputs digest, its tags, its OCI labels and its lineage.

Every image is tagged twice:

- `inputs-<hex>`: sha256 of canonical JSON of everything that decides its content — the
  builder and its recipe (the rendered Dockerfile, or the layer builder's profile), every
  context file's path, mode and sha256, the support files, the build arguments, the base
  image's digest, the platform, the manifest's extra labels and the ids of the build
  secrets (never their values). A build whose inputs tag is already in the registry is
  skipped and that image reused.
- the git commit (`<40 hex>`, `-dirty` when the tree has uncommitted changes), which moves
  to the reused image when a later commit has the same inputs.

The git commit and its time are *not* inputs: they go into the labels
(`org.opencontainers.image.revision`, `.source`, `.created` = the commit time, so a
rebuild on another machine is byte-identical) and the `dev.trainops.lineage` label and
annotation. A reused image keeps the revision of the commit that first built it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops import clock
from trainops.errors import InputError
from trainops.image.context import Selection
from trainops.image.templates import SupportFile
from trainops.registry import media
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import sha256_digest
from trainops.registry.lineage_data import Lineage, Parent

INPUTS_TAG_PREFIX = "inputs-"
A_INPUTS = "dev.trainops.inputs"
A_BASE_NAME = "org.opencontainers.image.base.name"
A_BASE_DIGEST = "org.opencontainers.image.base.digest"
RESERVED_LABELS = (media.A_REVISION, media.A_CREATED)
RESERVED_PREFIX = "dev.trainops."
INPUTS_VERSION = 1


@dataclass(frozen=True)
class Provenance:
    """Where the build's sources come from: the git commit, its time and its remote."""

    commit: str | None
    remote: str | None
    epoch: int  # SOURCE_DATE_EPOCH, else the commit time, else 0

    @property
    def created(self) -> str:
        return clock.stamp(self.epoch)

    @property
    def dirty(self) -> bool:
        return bool(self.commit and self.commit.endswith("-dirty"))


def provenance(path: Path) -> Provenance:
    from trainops.gitinfo import git_state  # lazy: loads subprocess

    git = git_state(path)
    explicit = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if explicit:
        try:
            epoch = int(explicit)
        except ValueError:
            raise InputError(
                f"SOURCE_DATE_EPOCH={explicit!r} is not a whole number of seconds", hint="unset it or fix it"
            ) from None
    else:
        epoch = git.commit_time if git else 0
    return Provenance(commit=git.commit if git else None, remote=git.remote if git else None, epoch=epoch)


def inputs_digest(
    *,
    builder: str,
    recipe: dict[str, Any],
    selection: Selection,
    support: list[SupportFile],
    support_digests: dict[str, str],
    build_args: dict[str, str],
    base_digest: str,
    platform: str,
    labels: dict[str, str],
    secret_ids: list[str],
) -> str:
    doc = {
        "version": INPUTS_VERSION,
        "builder": builder,
        "recipe": recipe,
        "base": base_digest,
        "platform": platform,
        "buildArgs": dict(sorted(build_args.items())),
        "labels": dict(sorted(labels.items())),
        "secrets": sorted(secret_ids),
        "files": [e.identity() for e in selection.entries],
        "support": [[f.relpath, f"{f.mode:04o}", support_digests[f.relpath]] for f in support],
    }
    return sha256_digest(canonical_json(doc))


def inputs_tag(digest: str) -> str:
    return INPUTS_TAG_PREFIX + digest.split(":", 1)[1]


def image_tags(digest: str, prov: Provenance) -> list[str]:
    """The inputs tag first (the cache key), then the commit tag if there is a commit."""
    return [inputs_tag(digest)] + ([prov.commit] if prov.commit else [])


def check_user_labels(labels: dict[str, str]) -> None:
    for key in labels:
        if key in RESERVED_LABELS or key.startswith(RESERVED_PREFIX):
            raise InputError(
                f"image.labels: {key} is set by trainops",
                hint=f"remove it; trainops writes {', '.join(RESERVED_LABELS)} and dev.trainops.* from git",
            )


def lineage(pipeline: str, prov: Provenance, parents: list[Parent]) -> Lineage:
    return Lineage(pipeline=pipeline, git_commit=prov.commit, git_repo=prov.remote, parents=parents)


def lineage_json(value: Lineage) -> str:
    return canonical_json(value.as_json()).decode()


def image_labels(
    *,
    user: dict[str, str],
    prov: Provenance,
    line: Lineage,
    digest: str,
    pipeline: str,
) -> dict[str, str]:
    """Labels on every image: the manifest's, then OCI provenance and trainops lineage."""
    labels = {media.A_TITLE: pipeline}
    if prov.remote:
        labels[media.A_SOURCE] = prov.remote
    labels.update(user)
    if prov.commit:
        labels[media.A_REVISION] = prov.commit
    labels[media.A_CREATED] = prov.created
    labels[media.A_KIND] = "image"
    labels[media.A_LINEAGE] = lineage_json(line)
    labels[A_INPUTS] = digest
    return labels


def manifest_annotations(labels: dict[str, str], base_name: str | None, base_digest: str | None) -> dict[str, str]:
    """Manifest annotations of images trainops writes itself: provenance, kind, lineage, base."""
    keys = (media.A_TITLE, media.A_SOURCE, media.A_REVISION, media.A_CREATED, media.A_KIND, media.A_LINEAGE, A_INPUTS)
    notes = {k: labels[k] for k in keys if k in labels}
    if base_name:
        notes[A_BASE_NAME] = base_name
    if base_digest:
        notes[A_BASE_DIGEST] = base_digest
    return notes
