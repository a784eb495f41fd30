"""The eval, release and rollout stages: thin adapters over trainops.evaluate,
trainops.release and trainops.serve, the same under every executor."""

from __future__ import annotations

import importlib.util

from trainops.errors import InputError
from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.stage import Outcome

PROVIDERS = {"eval": "trainops.evaluate", "release": "trainops.release", "rollout": "trainops.serve"}


def missing_provider(stage: str) -> str | None:
    """The module a stage needs that this installation lacks, or None."""
    module = PROVIDERS.get(stage)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return module


def _unavailable(stage: str) -> InputError:
    return InputError(
        f"stage {stage} needs {PROVIDERS[stage]}, which this trainops does not have yet",
        hint=f"run the stages before it (trainops run --to {_before(stage)})",
    )


def _before(stage: str) -> str:
    return {"eval": "checkpoint", "release": "eval", "rollout": "release"}[stage]


def eval_stage(ctx: StageContext) -> Outcome:
    raise _unavailable("eval")


def release_stage(ctx: StageContext) -> Outcome:
    raise _unavailable("release")


def rollout_stage(ctx: StageContext) -> Outcome:
    raise _unavailable("rollout")
