"""Where a manifest's GitOps repository is, as git reads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainops.manifest import Manifest


def gitops_url(manifest: Manifest) -> tuple[str, bool]:
    """The GitOps repository as git reads it, and whether trainops may create it (a local path)."""
    url = manifest.pipeline.spec.gitops.repo
    if url.startswith("file://"):
        path = manifest.local_path(url[len("file://") :])
        return str(path.resolve()), True
    return url, False
