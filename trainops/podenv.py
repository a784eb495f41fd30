"""The names of the pod environment contract: what every training process and checkpoint
sidecar finds in its environment, in a cluster pod, an sbatch job and a local run alike.

One set of constants, used by the renderers (trainops.render.env, trainops.render.pod),
local runs (trainops.train.local) and the sidecar (`trainops ckpt watch`). This module
imports nothing heavy, so the CLI can name the variables in its help without loading more.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PIPELINE = "TRAINOPS_PIPELINE"
RUN_ID = "TRAINOPS_RUN_ID"
IMAGE = "TRAINOPS_IMAGE"  # name@sha256:… of the training image
IMAGE_DIGEST = "TRAINOPS_IMAGE_DIGEST"
CKPT_DIR = "TRAINOPS_CKPT_DIR"
CKPT_REPOSITORY = "TRAINOPS_CKPT_REPOSITORY"
GIT_COMMIT = "TRAINOPS_GIT_COMMIT"
NNODES = "TRAINOPS_NNODES"
NPROC_PER_NODE = "TRAINOPS_NPROC_PER_NODE"
RDZV_ENDPOINT = "TRAINOPS_RDZV_ENDPOINT"
NODE_RANK = "TRAINOPS_NODE_RANK"
DOCKER_CONFIG = "DOCKER_CONFIG"  # the registry credentials of the sidecar, when mounted

CONTRACT = (
    PIPELINE,
    RUN_ID,
    IMAGE,
    IMAGE_DIGEST,
    CKPT_DIR,
    CKPT_REPOSITORY,
    GIT_COMMIT,
    NNODES,
    NPROC_PER_NODE,
    RDZV_ENDPOINT,
    NODE_RANK,
    DOCKER_CONFIG,
)
# What a single-node local run sets in place of the scheduler (torch.distributed's names).
LOCAL_RANKS = (
    ("RANK", "0"),
    ("LOCAL_RANK", "0"),
    ("NODE_RANK", "0"),
    ("GROUP_RANK", "0"),
    (NODE_RANK, "0"),
    ("WORLD_SIZE", "1"),
    ("LOCAL_WORLD_SIZE", "1"),
    ("MASTER_ADDR", "127.0.0.1"),
)


@dataclass(frozen=True)
class PodEnvironment:
    """The contract as a process reads it (the checkpoint sidecar, `trainops ckpt watch`): what
    trainops.render.env wrote into the pod, the sbatch job or the local run's environment."""

    pipeline: str | None = None
    run_id: str | None = None
    image: str | None = None
    image_digest: str | None = None
    ckpt_repository: str | None = None
    git_commit: str | None = None
    node_rank: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> PodEnvironment:
        """The contract's values in `environ` (default: this process's); an empty one is unset."""
        env = os.environ if environ is None else environ
        return cls(
            pipeline=env.get(PIPELINE) or None,
            run_id=env.get(RUN_ID) or None,
            image=env.get(IMAGE) or None,
            image_digest=env.get(IMAGE_DIGEST) or None,
            ckpt_repository=env.get(CKPT_REPOSITORY) or None,
            git_commit=env.get(GIT_COMMIT) or None,
            node_rank=env.get(NODE_RANK) or None,
        )

    @property
    def leader(self) -> bool:
        """Whether this is the run's leader node (rank 0, or no rank: a single-node run)."""
        return self.node_rank in (None, "0")


# Where a scheduler says which node of the job a pod (or an sbatch task) is, first found wins:
# trainops' own (an indexed pod template), an Indexed Job's or JobSet's completion index,
# a Volcano task's index (within its task: a worker is 1 + it), Slurm's node index.
NODE_RANK_SOURCES = (NODE_RANK, "JOB_COMPLETION_INDEX", "VC_TASK_INDEX", "SLURM_NODEID")


def scheduler_node_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This node's rank in its job from the scheduler's environment, or None if none says."""
    env = os.environ if environ is None else environ
    for name in NODE_RANK_SOURCES:
        value = env.get(name, "")
        if value.isascii() and value.isdigit():
            return int(value)
    return None
