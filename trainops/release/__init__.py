"""Releases: a checkpoint with a passing eval (or a named person's override) packaged as a
ModelPack model, immutable once tagged.

Entry points: `create_release`, `list_releases`, `show_release`.
"""

from trainops.release.catalog import ReleaseInfo, list_releases, show_release
from trainops.release.create import ReleaseResult, create_release, release_repository

__all__ = ["ReleaseInfo", "ReleaseResult", "create_release", "list_releases", "release_repository", "show_release"]
