"""The names of the pod environment contract: what every training process and checkpoint
sidecar finds in its environment, in a cluster pod, an sbatch job and a local run alike.

One set of constants, used by the renderers (trainops.render.env, trainops.render.pod),
local runs (trainops.pipeline.local) and the sidecar (`trainops ckpt watch`). This module
imports nothing, so the CLI can name the variables in its help without loading more.
"""

from __future__ import annotations

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
