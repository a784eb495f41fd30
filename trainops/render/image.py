"""The image a rendered job runs: always pinned by digest, so what runs is what was built.

Accepted: `host/repo@sha256:<64 hex>` and `host/repo:tag@sha256:…` (an `oci://` prefix is
dropped: that is how trainops names registries). `file://` and `s3://` references are
rendered as given, with a warning: a kubelet cannot pull from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainops.errors import InputError

if TYPE_CHECKING:
    from trainops.registry.reference import Reference

_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?)"
_REF_RE = re.compile(
    rf"^(?P<name>(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z0-9+._-]+:[A-Za-z0-9=_-]+))?$"
)
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_TRAINOPS_SCHEMES = ("file://", "s3://")


@dataclass(frozen=True)
class PinnedImage:
    ref: str  # what pods run: name[:tag]@sha256:…
    name: str  # host/repository
    tag: str | None
    digest: str  # sha256:…

    @property
    def pullable(self) -> bool:
        """Whether a kubelet (or enroot) can pull it: not a file:// or s3:// trainops reference."""
        return not self.ref.startswith(_TRAINOPS_SCHEMES)

    @property
    def enroot(self) -> str:
        """The image as pyxis/enroot names it: `REGISTRY#REPOSITORY:sha256:…`.

        enroot has no `@digest` syntax and takes the registry before a `#`; the digest goes
        where a tag would, which makes enroot fetch `/v2/<repo>/manifests/sha256:…` — the
        manifest by digest.
        """
        host, slash, rest = self.name.partition("/")
        if slash and ("." in host or ":" in host or host == "localhost"):
            return f"{host}#{rest}:{self.digest}"
        return f"{self.name}:{self.digest}"


def pin_image(text: str, *, field: str) -> PinnedImage:
    """Parse an image that must be pinned by digest; `field` names where it came from."""
    how = f"pin it by digest: {field}: HOST/REPOSITORY@sha256:<64 hex> (or :TAG@sha256:…)"
    if not isinstance(text, str) or not text or text != text.strip():
        raise InputError(f"{field} {text!r} is not an image reference", hint=how)
    if text.startswith(_TRAINOPS_SCHEMES):
        name, at, digest = text.rpartition("@")
        if not at or not _DIGEST_RE.match(digest):
            raise InputError(f"{field} {text!r} is not pinned by digest", hint=how)
        return PinnedImage(ref=text, name=name, tag=None, digest=digest)
    bare = text.removeprefix("oci://")
    match = _REF_RE.match(bare)
    if match is None:
        raise InputError(f"{field} {text!r} is not an image reference", hint=how)
    digest = match.group("digest")
    if digest is None:
        raise InputError(f"{field} {text!r} is a mutable tag: the job could run an image nobody built for it", hint=how)
    if not _DIGEST_RE.match(digest):
        raise InputError(f"{field} {text!r}: {digest!r} is not a sha256 digest", hint=how)
    return PinnedImage(ref=bare, name=match.group("name"), tag=match.group("tag"), digest=digest)


def pinned_digest(text: str) -> str | None:
    """The digest an image reference is pinned by, or None when it is not a pinned image."""
    try:
        return pin_image(text, field="image").digest
    except InputError:
        return None


def is_pinned(text: str) -> bool:
    return pinned_digest(text) is not None


def cluster_image(ref: Reference) -> str:
    """How a pod names an image: host/repository@digest (oci://), else the trainops reference."""
    if ref.scheme == "oci":
        return f"{ref.location}/{ref.repository}@{ref.digest}"
    return str(ref.with_tag(None))
