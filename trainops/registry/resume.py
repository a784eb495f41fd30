"""Upload sessions that a later push resumes, kept beside the digest cache so that they
outlive the process that began them.

An interrupted push leaves part of a large blob with the store. file:// keeps a partial
file named after the blob, s3:// a multipart upload that ListMultipartUploads finds again:
neither needs a record. An OCI upload session is found again only by its location, so the
location is kept here, in $XDG_CACHE_HOME/trainops/uploads/, one small file per session,
keyed by the repository's URL and the blob: its digest, or, for a file sent while it is
hashed, the file's identity (digestcache.file_identity: a file that changed is never
resumed onto). The registry says what the session holds; the digest it checks at the end
covers the bytes sent before as well. No credential is kept: a location's user:password
part is dropped before it is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from trainops.registry.digestcache import cache_dir


def _record(where: str, blob: str) -> Path:
    name = hashlib.sha256(f"{where}\n{blob}".encode()).hexdigest()[:40]
    return cache_dir() / "uploads" / f"{name}.json"


def load(where: str, blob: str) -> str | None:
    """The location of the session of blob to where, if one was begun and not finished."""
    try:
        data = json.loads(_record(where, blob).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("where") != where or data.get("blob") != blob:
        return None
    location = data.get("location")
    return location if isinstance(location, str) else None


def save(where: str, blob: str, location: str) -> None:
    """Keep a session's location (best effort: a record that cannot be written costs a resume)."""
    parts = urlsplit(location)
    if parts.username is not None or parts.password is not None:
        netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        location = urlunsplit(parts._replace(netloc=netloc))
    path = _record(where, blob)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps({"where": where, "blob": blob, "location": location}))
        os.replace(tmp, path)


def forget(where: str, blob: str) -> None:
    with contextlib.suppress(OSError):
        _record(where, blob).unlink()
