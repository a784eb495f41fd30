"""spec.rollout.disaggregation: prefill and decode served on separate pools, released as a pair.

    rollout:
      engine: vllm
      traffic: gateway-api
      disaggregation:
        connector: NixlConnector          # vLLM's KV connector; SGLang: mooncake or nixl
        prefill: {replicas: 1, gpusPerReplica: 2, tensorParallel: 2}
        decode: {replicas: 2, gpusPerReplica: 1}
        ratio: "1:2"                      # prefill:decode replicas of each slice
        slices: 2                         # whole prefill+decode copies (DisaggregatedSet slices)
        placement: rack                   # a tier of spec.cluster.topology: a slice inside one
        endpointPicker: {image: …}        # the InferencePool's endpoint picker (P/D aware)

Role replicas are per slice. The checks across fields (the connector against the engine, the
ratio against the replicas, the placement against the cluster's tiers, the traffic method) are
`trainops.manifest.disagg_checks`, each at the line of the field at fault.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainops.manifest.common import Name, StrictModel

# the KV connectors vLLM registers by name (vllm/distributed/kv_transfer/kv_connector/factory.py)
# that move KV caches between a prefill and a decode instance
VLLM_CONNECTORS = ("NixlConnector", "LMCacheConnectorV1", "P2pNcclConnector", "MooncakeConnector")
# SGLang's --disaggregation-transfer-backend choices for GPUs (server_args.py)
SGLANG_BACKENDS = ("mooncake", "nixl")
CONNECTORS = {"vllm": VLLM_CONNECTORS, "sglang": SGLANG_BACKENDS}
ROLES = ("prefill", "decode")
LABEL_ROLE = "llm-d.ai/role"  # every pod's role: the label llm-d's P/D filters read


class DisaggRole(StrictModel):
    """One role's engines: how many in each slice, and how big each is."""

    replicas: int = Field(ge=1, description="Engines of this role in each slice (at least 1).")
    gpus_per_replica: int = Field(1, ge=1, le=512, description="GPUs of one engine of this role.")
    tensor_parallel: int = Field(1, ge=1)
    data_parallel: int = Field(1, ge=1, description="Data-parallel ranks inside one engine.")
    engine_args: list[str] = Field(default_factory=list, description="Extra engine flags for this role only.")

    @model_validator(mode="after")
    def _fits(self) -> DisaggRole:
        if self.tensor_parallel * self.data_parallel != self.gpus_per_replica:
            raise ValueError(
                f"tensorParallel × dataParallel ({self.tensor_parallel}×{self.data_parallel}) "
                f"must equal gpusPerReplica ({self.gpus_per_replica})"
            )
        return self


class EndpointPicker(StrictModel):
    """The InferencePool's endpoint picker: a P/D-aware scheduler (llm-d's router) the Gateway asks
    which pod serves each request."""

    image: str = Field(min_length=1, description="The endpoint picker's image, pinned (tag or digest).")
    replicas: int = Field(1, ge=1)
    port: int = Field(9002, ge=1, le=65535, description="The picker's gRPC (ext-proc) port.")


class Disaggregation(StrictModel):
    """Prefill and decode on separate pools; a release is always the pair."""

    connector: str = Field(
        min_length=1,
        description="How KV caches move from prefill to decode: vLLM's kv_connector "
        f"({', '.join(VLLM_CONNECTORS)}) or SGLang's --disaggregation-transfer-backend ({', '.join(SGLANG_BACKENDS)}).",
    )
    prefill: DisaggRole
    decode: DisaggRole
    ratio: str | None = Field(
        None,
        pattern=r"^[1-9][0-9]*:[1-9][0-9]*$",
        description='prefill:decode engines of a slice, such as "1:2": the replicas must be a whole multiple of it.',
    )
    slices: int = Field(1, ge=1, le=100, description="Whole prefill+decode copies; each rolls out as one.")
    workload: Literal["disaggregated-set", "leader-worker-sets", "llm-inference-service"] = Field(
        "disaggregated-set",
        description="disaggregated-set: one LeaderWorkerSet DisaggregatedSet per release (LWS ≥ 0.10); "
        "leader-worker-sets: a LeaderWorkerSet per role, for clusters without DisaggregatedSet; "
        "llm-inference-service: one KServe LLMInferenceService per release (KServe makes the workloads, the pool "
        "and its endpoint picker; trainops' HTTPRoute, which it names, splits the traffic).",
    )
    placement: Name | None = Field(
        None,
        description="A tier of spec.cluster.topology (rack…): each slice's prefill and decode inside one domain "
        "of it, slices in different domains.",
    )
    endpoint_picker: EndpointPicker | None = Field(
        None, description="Required unless workload llm-inference-service (whose picker KServe runs)."
    )
