"""Releases: a checkpoint with a passing eval (or a named person's override) packaged as a
ModelPack model, immutable once tagged.

Entry points: `create_release`, `list_releases`, `show_release`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.release.catalog import ReleaseInfo, list_releases, show_named_release, show_release
    from trainops.release.create import ReleaseResult, create_release, release_repository

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.release.catalog": (
            "ReleaseInfo",
            "list_releases",
            "show_named_release",
            "show_release",
        ),
        "trainops.release.create": (
            "ReleaseResult",
            "create_release",
            "release_repository",
        ),
    },
)

__all__ = [
    "ReleaseInfo",
    "ReleaseResult",
    "create_release",
    "list_releases",
    "release_repository",
    "show_named_release",
    "show_release",
]
