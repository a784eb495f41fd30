"""The serving engines' command lines: vLLM (`vllm serve`) and SGLang (`python3 -m sglang.launch_server`).

Both serve an OpenAI-compatible API on rollout.port, answer GET /health when ready, and
expose Prometheus metrics on /metrics of the same port (SGLang with --enable-metrics).

A replica larger than one node runs as a LeaderWorkerSet group of
gpusPerReplica / gpusPerNode pods. vLLM: every pod joins one Ray cluster (the leader
starts its head, workers join it at $(LWS_LEADER_ADDRESS)); the leader waits until the
whole group has joined, then starts `vllm serve` over it. SGLang: every pod runs
launch_server with --nnodes, --node-rank $(LWS_WORKER_INDEX) and --dist-init-addr at the
leader; only the leader (rank 0) serves HTTP. Kubernetes expands $(VAR) from the
environment LWS injects into every container.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from trainops.manifest.serving import RolloutSpec

MODEL_DIR = "/models"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
RAY_PORT = 6379
SGLANG_DIST_PORT = 20000


@dataclass(frozen=True)
class EngineCommands:
    """The main container's command of each pod role (worker is None for a one-pod replica)."""

    leader: list[str]
    worker: list[str] | None


def nodes_per_replica(rollout: RolloutSpec) -> int:
    """Pods per replica: 1, or gpusPerReplica / gpusPerNode when a replica spans nodes."""
    if rollout.gpus_per_replica <= rollout.gpus_per_node:
        return 1
    return rollout.gpus_per_replica // rollout.gpus_per_node


def gpus_per_pod(rollout: RolloutSpec) -> int:
    return rollout.gpus_per_replica if nodes_per_replica(rollout) == 1 else rollout.gpus_per_node


def _vllm_args(rollout: RolloutSpec, pipeline: str) -> list[str]:
    args = ["vllm", "serve", MODEL_DIR, "--served-model-name", rollout.served_name(pipeline)]
    args += ["--host", "0.0.0.0", "--port", str(rollout.port)]
    args += ["--tensor-parallel-size", str(rollout.tensor_parallel)]
    args += ["--pipeline-parallel-size", str(rollout.pipeline_parallel)]
    if rollout.max_model_len is not None:
        args += ["--max-model-len", str(rollout.max_model_len)]
    return args + list(rollout.engine_args)


def _sglang_args(rollout: RolloutSpec, pipeline: str) -> list[str]:
    args = ["python3", "-m", "sglang.launch_server", "--model-path", MODEL_DIR]
    args += ["--served-model-name", rollout.served_name(pipeline), "--host", "0.0.0.0", "--port", str(rollout.port)]
    args += ["--tp-size", str(rollout.tensor_parallel), "--pp-size", str(rollout.pipeline_parallel)]
    if rollout.max_model_len is not None:
        args += ["--context-length", str(rollout.max_model_len)]
    return [*args, "--enable-metrics", *rollout.engine_args]


def _ray_wait(nodes: int) -> str:
    check = (
        'import ray, sys; ray.init(address="auto", logging_level="ERROR"); '
        f'sys.exit(0 if sum(1 for n in ray.nodes() if n["Alive"]) >= {nodes} else 1)'
    )
    return f"until python3 -c {shlex.quote(check)}; do sleep 5; done"


def engine_commands(rollout: RolloutSpec, pipeline: str) -> EngineCommands:
    """The engine's command lines for the leader (or the only pod) and the workers."""
    nodes = nodes_per_replica(rollout)
    if rollout.engine == "vllm":
        serve = _vllm_args(rollout, pipeline)
        if nodes == 1:
            return EngineCommands(serve, None)
        leader = f"ray start --head --port={RAY_PORT} && {_ray_wait(nodes)} && exec {shlex.join(serve)}"
        worker = f"exec ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"
        return EngineCommands(["bash", "-c", leader], ["bash", "-c", worker])
    serve = _sglang_args(rollout, pipeline)
    if nodes == 1:
        return EngineCommands(serve, None)
    multi = ["--nnodes", str(nodes), "--node-rank", "$(LWS_WORKER_INDEX)"]
    multi += ["--dist-init-addr", f"$(LWS_LEADER_ADDRESS):{SGLANG_DIST_PORT}"]
    return EngineCommands([*serve, *multi], [*serve, *multi])
