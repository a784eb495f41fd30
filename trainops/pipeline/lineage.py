"""`trainops lineage TARGET`: which walk answers it. Nothing heavy at import: walking an
artifact's lineage on a project without spec.rollout reads plain data only (no pydantic),
as `ckpt ls` does; the commit and rollout walks load trainops.rollout when they are asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.registry.context import Registries
from trainops.registry.lineage import Direction, Graph, lineage_graph

if TYPE_CHECKING:
    from trainops.manifest import Manifest

GIT_PREFIX = "git:"  # `trainops lineage git:REV`


def walk_lineage(
    registries: Registries,
    manifest: Manifest | None,
    *,
    target: str,
    direction: Direction = "up",
    scan: str | None = None,
    records: bool = False,
) -> Graph:
    """A git revision (`git:REV`, resolved in the manifest's repository, else the current
    directory's) walks down from the commit; an artifact walks `direction`, with the rollout
    commits that served its releases when the manifest sets spec.rollout. `scan` is the
    registry searched for descendants (default: the manifest's); `records` shows the stage
    records of `trainops run` too."""
    root = registries.root(scan) if scan else None
    if target.startswith(GIT_PREFIX):
        from trainops.rollout.lineage import lineage_from_commit  # lazy: loads pydantic

        repo_dir = manifest.root if manifest is not None else Path.cwd()
        same = None
        if manifest is not None:
            from trainops.pipeline.ci import same_content  # lazy: loads pydantic

            def same(commit: str) -> Iterator[str]:
                return same_content(manifest, commit)

        return lineage_from_commit(
            registries,
            manifest,
            rev=target[len(GIT_PREFIX) :],
            repo_dir=repo_dir,
            scan=root,
            records=records,
            same_content=same,
        )
    ref = registries.ref(target)
    if manifest is not None and manifest.pipeline.spec.rollout is not None:
        from trainops.rollout.lineage import lineage_with_rollouts  # lazy: loads pydantic

        return lineage_with_rollouts(registries, manifest, ref=ref, direction=direction, scan=root, records=records)
    return lineage_graph(registries, ref=ref, direction=direction, scan=root, records=records)
