"""An artifact's parents and the lineage `trainops push` records: references pinned to the
digests they name now, and the git state of the pushed tree."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import cast

from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage, Parent, Relation
from trainops.registry.store import resolve


def pin_parents(registries: Registries, parents: Iterable[tuple[str, str]]) -> list[Parent]:
    """(reference text, relation) pairs → parents pinned to digests (each must exist)."""
    out: list[Parent] = []
    for text, relation in parents:
        ref = registries.ref(text)
        found = resolve(registries, ref=ref)
        shown = ref.repo_url + (f":{found.ref.tag}" if found.ref.tag else "")
        # Parent refuses a relation that is not one of RELATIONS
        out.append(Parent(digest=found.manifest.digest, ref=shown, relation=cast(Relation, relation)))
    return out


def source_lineage(
    registries: Registries,
    *,
    source: Path,
    run_id: str | None = None,
    step: int | None = None,
    metrics: Mapping[str, float] | None = None,
    parents: Iterable[tuple[str, str]] = (),
) -> Lineage:
    """The lineage `trainops push` records for a file or tree: the git commit and remote of the
    repository holding it (if any), the run, step and metrics given, and the parents pinned.
    No pydantic: a re-push is a few stats and a HEAD."""
    from trainops.gitinfo import git_state  # lazy: loads subprocess

    git = git_state(source if source.is_dir() else source.parent)
    return Lineage(
        git_commit=git.commit if git else None,
        git_repo=git.remote if git else None,
        run_id=run_id,
        step=step,
        metrics=dict(metrics or {}),
        parents=pin_parents(registries, parents),
    )
