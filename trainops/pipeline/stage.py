"""What a stage is to the runner: its outputs, its outcome, and the events a run emits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["cached", "ran", "skipped", "runs", "failed", "not-run"]
EventKind = Literal["plan", "start", "cached", "done", "skipped", "failed", "note"]


@dataclass(frozen=True)
class Output:
    """One thing a stage produced: a pinned artifact (ref@digest), or a digest with no
    artifact (the environment a local run ran in)."""

    name: str
    digest: str
    ref: str | None = None


@dataclass
class Outcome:
    """What an executor returns for a stage that ran (or was skipped, with the reason)."""

    outputs: list[Output]
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the stage did nothing (no engine and no base image, …)
    cacheable: bool = True  # False: the stage is recomputed every run (it is cheap, or it was skipped)


@dataclass
class StageResult:
    name: str
    status: Status
    key: str | None = None
    why: str = ""
    outputs: list[Output] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def output(self, name: str) -> Output | None:
        return next((o for o in self.outputs if o.name == name), None)


@dataclass(frozen=True)
class Event:
    """One thing that happened in a run, for a progress view (the library never prints)."""

    stage: str
    kind: EventKind
    message: str


EventSink = Callable[[Event], None]


def no_events(_: Event) -> None:
    return None
