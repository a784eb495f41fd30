"""Build secrets (`image.secrets`): their values, and the checks that keep them out of images.

A secret reaches a build only as a secret mount (`RUN --mount=type=secret,id=…`) of the
steps that install things; it is never a build argument, an ENV, a label or a file of the
context. Before any build:

- a secret whose `file` lies inside the build context and is selected into it is refused
  (it would be copied into the image): exclude it or keep it elsewhere;
- every context file up to 16 MiB is searched for every secret value of 8 bytes or more;
  a hit is refused (a `.env` or a notebook holding the token would end up in a layer).

The docker builder needs an engine whose Docker API build endpoint takes secrets (Podman's
`secrets` parameter); Docker's own build endpoint carries them only inside BuildKit
sessions, which it refuses plainly. The layer builder runs no build steps, so nothing can
use a secret: it ignores declared secrets (and says so), after the same two checks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import InputError, NotFoundError
from trainops.image.context import Selection, find_secret
from trainops.manifest.stages import BuildSecret


@dataclass(frozen=True)
class SecretValue:
    id: str
    value: bytes


def _source_path(secret: BuildSecret, root: Path) -> Path:
    assert secret.file is not None
    path = Path(secret.file).expanduser()
    return path if path.is_absolute() else root / path


def read_secret(secret: BuildSecret, root: Path) -> SecretValue:
    """The value of a secret from its env variable or file; missing sources are errors."""
    where = f"image.secrets[{secret.id}]"
    if secret.env is not None:
        value = os.environ.get(secret.env)
        if value is None:
            raise InputError(
                f"{where}: environment variable {secret.env} is not set",
                hint=f"export {secret.env} before building, or remove the secret",
            )
        return SecretValue(secret.id, value.encode())
    path = _source_path(secret, root)
    try:
        return SecretValue(secret.id, path.read_bytes())
    except FileNotFoundError:
        raise NotFoundError(
            f"{where}: secret file {path} does not exist", hint="create it or fix image.secrets"
        ) from None
    except OSError as err:
        raise InputError(f"{where}: cannot read {path}: {err.strerror}") from None


def available_values(secrets: list[BuildSecret], root: Path) -> dict[str, bytes]:
    """Values of the secrets whose source exists (for the leak checks of builds that do not use them)."""
    out: dict[str, bytes] = {}
    for secret in secrets:
        try:
            out[secret.id] = read_secret(secret, root).value
        except (InputError, NotFoundError):
            continue
    return out


def check_not_baked(secrets: list[BuildSecret], values: dict[str, bytes], root: Path, selection: Selection) -> None:
    """Refuse a build context that would carry a secret into the image."""
    context = selection.root.resolve()
    selected = {e.relpath for e in selection.entries}
    for secret in secrets:
        if secret.file is None:
            continue
        path = _source_path(secret, root).resolve()
        if path.is_relative_to(context) and path.relative_to(context).as_posix() in selected:
            rel = path.relative_to(context).as_posix()
            raise InputError(
                f"image.secrets[{secret.id}]: its file {rel} is inside the build context and would be copied "
                "into the image",
                hint=f"add {rel} to .dockerignore or image.exclude, or keep the secret outside {context}",
            )
    hit = find_secret(selection, values)
    if hit is not None:
        rel, sid = hit
        raise InputError(
            f"the build context file {rel} contains the value of secret {sid!r} and would put it in the image",
            hint=f"add {rel} to .dockerignore or image.exclude, or remove the value from it",
        )
