"""Executors: how each stage is carried out.

    local    the embedded default: image-less local run (or the layer builder), training
             with the checkpoint watcher, eval, release, rollout commits to the GitOps repo
    cluster  render the training job and commit it to GitOps, then wait for what the job
             pushes (checkpoint tags) with a timeout

Every stage function takes a StageContext and returns an Outcome; eval, release and
rollout are the same for both executors (thin adapters over trainops.eval,
trainops.release and trainops.rollout).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.stage import Outcome

StageFunction = Callable[[StageContext], Outcome]
EXECUTORS = ("local", "cluster")


def stage_functions(executor: str) -> Mapping[str, StageFunction]:
    from trainops.pipeline.executors import cluster, flow, local

    common: dict[str, StageFunction] = {
        "checkpoint": local.checkpoint_stage,
        "eval": flow.eval_stage,
        "release": flow.release_stage,
        "rollout": flow.rollout_stage,
    }
    if executor == "cluster":
        return {"image": cluster.image_stage, "train": cluster.train_stage, **common}
    return {"image": local.image_stage, "train": local.train_stage, **common}


def skip_check(executor: str) -> Callable[[StageContext], Outcome | None]:
    """The check that decides, before the cache, whether a stage is skipped (image only)."""
    from trainops.pipeline.executors import cluster, local

    return cluster.image_skip if executor == "cluster" else local.image_skip
