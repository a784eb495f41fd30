"""Releases are immutable: a release tag is never moved.

`same_release` looks the tag up before anything is pushed: absent → None (push it); present
with the same files (path and digest of every layer) → that release (nothing to do); present
with other files → ExistsError (exit 5). The push itself then writes with the store's
move_tag=False, so a writer that took the tag in between is not overwritten either.
"""

from __future__ import annotations

from pathlib import Path

from trainops.errors import ExistsError, NotFoundError
from trainops.registry.artifact import scan_tree
from trainops.registry.context import Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, resolve


def same_release(registries: Registries, *, target: Reference, files: dict[str, str]) -> Resolved | None:
    """None if target's tag is free; the release if it holds exactly `files` (relpath →
    digest); else ExistsError."""
    try:
        found = resolve(registries, ref=target)
    except NotFoundError:
        return None
    theirs = {found.parsed.file_path(layer, i): layer.digest for i, layer in enumerate(found.parsed.layers)}
    if theirs == files and found.parsed.kind == "model":
        return found
    changed = sorted(set(theirs) ^ set(files) | {k for k in theirs.keys() & files.keys() if theirs[k] != files[k]})
    raise ExistsError(
        f"release {target} exists with other content ({found.manifest.digest[:19]}; differs in "
        f"{', '.join(changed[:3]) or 'its kind'}); releases are immutable and a tag is never moved",
        hint="release under another --version, or change release.tag",
    )


def local_files(directory: Path) -> dict[str, str]:
    """relpath → digest of the files under directory."""
    cache = DigestCache()
    return {entry.relpath: cache.digest(entry.path)[0] for entry in scan_tree(directory)}
