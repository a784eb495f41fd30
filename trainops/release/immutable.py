"""Releases are immutable: a release tag is never moved.

`same_release` looks the tag up before anything is pushed: absent → None (push it); present
with the same files (path and digest of every layer) → its digest (nothing to do); present
with other files → ExistsError (exit 5). Between this check and the push another writer
could still take the tag; the store's refuse-to-move option closes that window once it lands.
"""

from __future__ import annotations

from pathlib import Path

from trainops.errors import ExistsError, NotFoundError
from trainops.registry.artifact import scan_tree
from trainops.registry.context import Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.reference import Reference
from trainops.registry.store import resolve


def same_release(registries: Registries, *, target: Reference, directory: Path) -> str | None:
    """None if target's tag is free; its digest if it holds exactly these files; else ExistsError."""
    try:
        found = resolve(registries, ref=target)
    except NotFoundError:
        return None
    theirs = {found.parsed.file_path(layer, i): layer.digest for i, layer in enumerate(found.parsed.layers)}
    cache = DigestCache()
    ours = {entry.relpath: cache.digest(entry.path)[0] for entry in scan_tree(directory)}
    if theirs == ours and found.parsed.kind == "model":
        return found.manifest.digest
    changed = sorted(set(theirs) ^ set(ours) | {k for k in theirs.keys() & ours.keys() if theirs[k] != ours[k]})
    raise ExistsError(
        f"release {target} exists with other content ({found.manifest.digest[:19]}; differs in "
        f"{', '.join(changed[:3]) or 'its kind'}); releases are immutable and a tag is never moved",
        hint="release under another --version, or change release.tag",
    )
