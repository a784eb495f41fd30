"""Release tags are never moved or removed by accident.

A release is a model artifact made by `trainops release` (artifactType ModelPack model,
with the `dev.trainops.release.checkpoint` annotation). A tag that names one — in the
release repository or anywhere else — is moved (push, `registry tag`, `registry copy`) or
removed (`registry rm`, `registry gc`) only with an override: `--force --reason TEXT`.
Whether anything may be deleted is decided in trainops.registry.retention.keep; a release the
GitOps repository serves is never removed, even then (trainops.rollout.protect reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops.errors import ExistsError, NotFoundError, UsageError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, parse_manifest
from trainops.registry.backends.base import Backend

FORCE_HINT = "release tags never move or go by accident: pass --force --reason TEXT to do it anyway"


@dataclass(frozen=True)
class Override:
    """`--force --reason TEXT`: a release tag may move or go; the reason is said with it."""

    reason: str


def override_from(*, force: bool, reason: str | None) -> Override | None:
    """--force and --reason come together; either alone is a usage error."""
    if force and not (reason and reason.strip()):
        raise UsageError("--force needs --reason TEXT: say why the release tag moves or goes")
    if reason and not force:
        raise UsageError("--reason goes with --force", hint="add --force, or drop --reason")
    return Override(reason.strip()) if force and reason else None


def is_release(parsed: ParsedManifest) -> bool:
    return parsed.artifact_type == media.MODEL_ARTIFACT and media.A_RELEASE_CHECKPOINT in parsed.annotations


def release_at(backend: Backend, repo: str, digest: str) -> bool:
    """Whether the manifest `digest` of repo is a release (False when it is gone)."""
    try:
        return is_release(parse_manifest(backend.get_manifest(repo, digest)))
    except NotFoundError:
        return False


def check_move(
    backend: Backend, repo: str, tag: str | None, current: str, digest: str, *, where: str, override: Override | None
) -> None:
    """Before tag (naming `current`) is pointed at `digest`: refused when it names a release
    and there is no override (ExistsError, exit 5; nothing written)."""
    if override is None and release_at(backend, repo, current):
        raise ExistsError(
            f"tag {tag} of {where} names the release {current[:19]}; refusing to move it to {digest[:19]}",
            hint=FORCE_HINT,
        )
