"""What shell completion offers for a parameter, as kubectl completes resource names: the
manifest's environments, references (the repositories of its registry, then a repository's
tags), run ids and incident ids (from the records the registry and this project keep).

Completion runs on every Tab: a missing manifest, an unreachable registry or a bad file
offers nothing, never an error or a traceback in the middle of a command line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import yaml

from trainops.projectdir import find_manifest
from trainops.registry.context import Registries

if TYPE_CHECKING:
    from trainops.manifest import Manifest

_T = TypeVar("_T")


def _quietly(read: Callable[[], list[_T]]) -> list[_T]:
    try:
        return read()
    except Exception:  # completion offers nothing rather than fail the shell's Tab
        return []


def _manifest_path(file: str | None) -> Path | None:
    return Path(file) if file else find_manifest()


def environments(file: str | None, incomplete: str) -> list[str]:
    """The names under the manifest's `environments:` (read as YAML: no validation on Tab)."""

    def read() -> list[str]:
        path = _manifest_path(file)
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) if path else None
        names = (doc or {}).get("environments") or {}
        return sorted(n for n in names if isinstance(n, str) and n.startswith(incomplete))

    return _quietly(read)


def _load(file: str | None, env: str | None) -> Manifest | None:
    from trainops.manifest import load_manifest  # lazy: loads pydantic

    path = _manifest_path(file)
    return load_manifest(path, env=env) if path else None


def references(file: str | None, env: str | None, incomplete: str) -> list[str]:
    """`REPO:` completes to that repository's tags (`REPO:TAG`); anything else to the
    repositories of the manifest's registry, named as short references (`team/model:`)."""

    def read() -> list[str]:
        from trainops.registry import listing  # lazy: loads concurrent.futures

        manifest = _load(file, env)
        if manifest is None:
            return []
        with Registries.for_manifest(manifest) as registries:
            if ":" in incomplete and "://" not in incomplete:
                repo = incomplete.rpartition(":")[0]
                names = listing.list_repository(registries, ref=registries.ref(repo), details=False).tags
                return [f"{repo}:{t.tag}" for t in names if f"{repo}:{t.tag}".startswith(incomplete)]
            found = listing.list_registry(registries, records=False).repositories
            root = registries.root().url.rstrip("/") + "/"
            short = [r.removeprefix(root) for r in found]  # as the manifest's registry completes them
            return [f"{r}:" for r in short if r.startswith(incomplete)]

    return _quietly(read)


def run_ids(file: str | None, env: str | None, incomplete: str) -> list[str]:
    """The runs the registry keeps a timeline or an incident of, and those submitted or
    run from this project."""

    def read() -> list[str]:
        from trainops.faults import timeline  # lazy: loads pydantic
        from trainops.faults.incidents import all_tags, incidents_repository, is_incident_tag  # lazy: loads pydantic
        from trainops.slurm.record import RECORD, runs_dir  # lazy: loads pydantic

        manifest = _load(file, env)
        if manifest is None:
            return []
        found: set[str] = set()
        with Registries.for_manifest(manifest) as registries:
            spec = manifest.pipeline.spec
            repository = incidents_repository(
                registries, registry=spec.registry, pipeline=manifest.pipeline.metadata.name
            )
            for tag in all_tags(registries, repository):
                if tag.endswith(timeline.TIMELINE_SUFFIX):
                    found.add(tag.removesuffix(timeline.TIMELINE_SUFFIX))
                elif is_incident_tag(tag, None):
                    found.add(tag.rpartition(".")[0])
        logs = timeline.run_log_path(manifest, "x").parent
        found |= {p.stem for p in logs.glob("*.log")} if logs.is_dir() else set()
        submitted = runs_dir(manifest)
        found |= {p.parent.name for p in submitted.glob(f"*/{RECORD}")} if submitted.is_dir() else set()
        return sorted(r for r in found if r.startswith(incomplete))

    return _quietly(read)


def incident_ids(file: str | None, env: str | None, incomplete: str) -> list[str]:
    """The incidents the registry records (`RUN.N`)."""

    def read() -> list[str]:
        from trainops.faults.incidents import all_tags, incidents_repository, is_incident_tag  # lazy: loads pydantic

        manifest = _load(file, env)
        if manifest is None:
            return []
        with Registries.for_manifest(manifest) as registries:
            spec = manifest.pipeline.spec
            repository = incidents_repository(
                registries, registry=spec.registry, pipeline=manifest.pipeline.metadata.name
            )
            tags = all_tags(registries, repository)
        return sorted(t for t in tags if is_incident_tag(t, None) and t.startswith(incomplete))

    return _quietly(read)
