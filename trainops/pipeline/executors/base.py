"""What a stage function gets: the manifest, the registries, its inputs and its key."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from trainops.cluster.access import ClusterAccess
from trainops.errors import InputError
from trainops.manifest import Manifest
from trainops.pipeline.keys import SourceDigest
from trainops.pipeline.stage import Output, StageResult
from trainops.registry.context import Registries


@dataclass
class StageContext:
    manifest: Manifest
    registries: Registries
    stage: str
    key: str
    source: SourceDigest
    inputs: Mapping[str, StageResult]  # results of the stages this one needs
    note: Callable[[str], None]  # progress for this stage (an Event of kind "note")
    insecure: bool = False
    timeout: float = 3600.0
    run_id: str | None = None
    command_stdout: IO[Any] | None = None  # where user commands' stdout goes (the CLI: stderr under -o json)
    quiet: float = 300.0  # cluster: a run is done when no checkpoint arrived for this long
    poll: float = 5.0
    cluster: ClusterAccess | None = None  # cluster executor: the job's status decides when training finished
    serve_image: str | None = None  # rollout: the serving image (a tag is resolved; default: built for HEAD)
    force_reason: str | None = None  # rollout: --force --reason, to roll out a release that was taken off
    fresh: bool = False  # train (local): from step 0, nothing restored (`trainops run --fresh`)
    notes: list[str] = field(default_factory=list)

    def input(self, stage: str, name: str) -> Output:
        """An output of a stage this one needs; its absence is an input error."""
        result = self.inputs.get(stage)
        found = result.output(name) if result else None
        if found is None:
            raise InputError(
                f"stage {self.stage} needs the {name} of stage {stage}, which has none",
                hint=f"run the {stage} stage first (trainops run --to {stage})",
            )
        return found

    def optional(self, stage: str, name: str) -> Output | None:
        result = self.inputs.get(stage)
        return result.output(name) if result else None

    def stage_run_id(self) -> str:
        """The run id of this stage's work: from its key, so a resumed run keeps it."""
        return self.run_id or f"{self.stage}-{self.key.split(':', 1)[1][:12]}"
