"""File downloads: by digest only, of a file some indexed artifact holds, verified.

The blob is fetched into a temporary file by the backend, which checks every byte against
the digest (a mismatch is refused with 502 and nothing is sent), then streamed and removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.errors import InputError, NotFoundError, TrainopsError
from trainops.registry.artifact import parse_manifest
from trainops.registry.backends.base import ManifestData
from trainops.ui.queries import DIGEST

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from trainops.ui.views import Browser, Views


def file_of(db: Any, *, repository: str, digest: str) -> str:
    """The path under which an indexed artifact of repository holds the blob digest."""
    if not DIGEST.match(digest):
        raise InputError(f"{digest!r} is not a digest", hint="downloads are by sha256 digest only")
    rows = db.execute(
        """SELECT a.manifest, a.stored FROM artifacts a JOIN repos r ON r.id = a.repo_id
           WHERE r.url = ? AND a.manifest LIKE ? LIMIT 20""",
        (repository, f"%{digest}%"),
    )
    for row in rows:
        parsed = parse_manifest(ManifestData(row["manifest"].encode(), "", row["stored"]))
        for i, layer in enumerate(parsed.layers):
            if layer.digest == digest:
                return parsed.file_path(layer, i)
    raise NotFoundError(f"no file with digest {digest} in {repository}")


def fetch_verified(browser: Browser, *, repository: str, digest: str) -> Path:
    """The blob in a temporary file, verified against its digest by the backend."""
    ref = browser.registries.ref(repository)
    fd, name = tempfile.mkstemp(prefix="trainops-ui-")
    os.close(fd)
    path = Path(name)
    try:
        browser.registries.backend(ref).download_blob(ref.repository, digest, path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def download_route(browser: Browser, views: Views) -> Any:
    from starlette.background import BackgroundTask  # lazy: loads starlette
    from starlette.responses import FileResponse  # lazy: loads starlette

    def handle(request: Request) -> Response:
        digest = request.path_params["digest"]
        repository = request.query_params.get("repository", "")
        try:
            name = file_of(browser.index.connect(), repository=repository, digest=digest)
            path = fetch_verified(browser, repository=repository, digest=digest)
        except TrainopsError as err:
            return views.error_page(err)
        return FileResponse(
            path,
            filename=name.rsplit("/", 1)[-1],
            media_type="application/octet-stream",
            background=BackgroundTask(path.unlink, missing_ok=True),
        )

    return handle
