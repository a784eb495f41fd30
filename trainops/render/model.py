"""What rendering returns: files, the Kubernetes objects in them, and what checking them found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class RenderedFile:
    """One file of the rendered tree."""

    path: str  # posix path relative to the output root, e.g. "train/volcano-job.yaml"
    text: str


@dataclass(frozen=True)
class Rendered:
    """A rendered tree: its files and every Kubernetes object in them (not the sbatch script).

    `sources[i]` is the path of the file `objects[i]` is in. `warnings` are things that render
    but will not work as written (a cluster cannot reach a file:// registry, …).
    """

    files: list[RenderedFile]
    objects: list[dict[str, Any]]
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SchemaProblem:
    """One way a rendered object differs from what its API server accepts."""

    file: str
    kind: str
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.file, f"{self.kind}/{self.name}" if self.kind else "") if part)
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{where}: {text}" if where else text


@dataclass(frozen=True)
class RenderCheck:
    """What `check_render` found for one manifest (one environment)."""

    env: str | None
    scheduler: str | None
    files: list[str]
    counts: dict[str, int]  # "batch.volcano.sh/v1alpha1 Job" → how many objects were checked
    problems: list[SchemaProblem]
    warnings: list[str]
    note: str = ""  # said when there is nothing to render (the local scheduler, no train section)
    data_properties: ClassVar[tuple[str, ...]] = ("ok", "objects")

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def objects(self) -> int:
        return sum(self.counts.values())
