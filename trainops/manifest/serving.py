"""Models of the rollout stage: the serving engine, traffic method, canary, analysis and A/B."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from trainops.manifest.common import (
    CompareOp,
    Duration,
    ImageRef,
    Name,
    Percent,
    Quantity,
    RelativePath,
    StrictModel,
)
from trainops.manifest.disagg import Disaggregation
from trainops.manifest.stages import ImageSpec


class CanaryStep(StrictModel):
    weight: Percent = Field(description="Percent of traffic sent to the new model.")
    pause: Duration | Literal["manual"] | None = Field(
        None, description="Wait this long (or until promoted, with manual) before the next step."
    )


class Canary(StrictModel):
    steps: list[CanaryStep] = Field(min_length=1)

    @model_validator(mode="after")
    def _rising(self) -> Canary:
        weights = [s.weight for s in self.steps]
        if any(b < a for a, b in pairwise(weights)):
            raise ValueError(f"canary weights must not decrease: {weights}")
        return self


class Threshold(StrictModel):
    """A metric the new model must keep within bounds while it takes traffic."""

    metric: str = Field(min_length=1, description="Name of the check, such as ttft_p95_ms.")
    query: str = Field(min_length=1, description="PromQL that yields one number.")
    op: CompareOp
    value: float


class Analysis(StrictModel):
    prometheus: str = Field(
        "http://prometheus.monitoring.svc:9090", pattern=r"^https?://", description="Prometheus address."
    )
    interval: Duration = "1m"
    count: int | None = Field(None, ge=1, description="Measurements per step; default: until the step ends.")
    failure_limit: int = Field(1, ge=0)
    thresholds: list[Threshold] = Field(min_length=1)


class HeaderMatch(StrictModel):
    header: str = Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
    value: str
    type: Literal["exact", "regex"] = "exact"


class ABTest(StrictModel):
    """Requests that match go to the candidate; the rest follow the canary weights."""

    match: list[HeaderMatch] = Field(min_length=1)


class GatewayRef(StrictModel):
    name: Name
    namespace: Name | None = None
    section_name: str | None = None


class SignatureKeyRef(StrictModel):
    """Where the serving pods find the public key that verifies a release's signature."""

    config_map: Name | None = Field(None, description="A ConfigMap holding the PEM public key.")
    secret: Name | None = Field(None, description="A Secret holding the PEM public key.")
    key: str = Field("release.pub", pattern=r"^[-._A-Za-z0-9]+$", description="The key (file name) of the PEM in it.")

    @model_validator(mode="after")
    def _one_source(self) -> SignatureKeyRef:
        if (self.config_map is None) == (self.secret is None):
            raise ValueError("set exactly one of configMap or secret")
        return self


class RolloutSpec(StrictModel):
    """Serving the released model, and how traffic moves to it."""

    engine: Literal["vllm", "sglang"] = "vllm"
    traffic: Literal["argo-rollouts", "gateway-api", "kserve"] = "argo-rollouts"
    kserve_deployment_mode: Literal["Knative", "Standard"] = Field(
        "Knative",
        description="traffic kserve: the InferenceService's serving.kserve.io/deploymentMode, rendered explicitly "
        "(the cluster's default is not relied on). Knative (Serverless) is the mode whose controller splits "
        "traffic by canaryTrafficPercent; Standard (RawDeployment) ignores it, so it takes no canary steps.",
    )
    model: str | None = Field(None, description="A model reference; default: what release publishes.")
    image: ImageSpec | None = Field(None, description="Serving image; default template: serve-<engine>.")
    pinned_image: ImageRef | None = Field(
        None,
        description="A prebuilt serving image pinned by digest (NAME@sha256:…), served as it is; default: the "
        "serving image built for the commit. `--image` overrides it.",
    )
    namespace: Name | None = None
    replicas: int = Field(2, ge=1)
    gpus_per_replica: int = Field(1, ge=1, le=512)
    gpus_per_node: int = Field(
        8,
        ge=1,
        le=64,
        description="GPUs a node has; a replica needing more becomes a LeaderWorkerSet of "
        "gpusPerReplica / gpusPerNode pods (the leader starts the engine's multi-node mode, workers join).",
    )
    gpu_resource: str = Field("nvidia.com/gpu", min_length=1, description="Extended resource name of a GPU.")
    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    max_model_len: int | None = Field(None, ge=1)
    served_model_name: str | None = None
    engine_args: list[str] = Field(default_factory=list, description="Extra engine command-line flags.")
    port: int = Field(8000, ge=1, le=65535)
    cpu: Quantity | int | None = None
    memory: Quantity | None = None
    shared_memory: Quantity = Field("16Gi", description="Size of the memory-backed /dev/shm.")
    startup_budget: Duration = Field("30m", description="How long the engine may take to load weights and start.")
    model_delivery: Literal["init-container", "image-volume"] = Field(
        "init-container",
        description="init-container: `trainops pull RELEASE@sha256:… /models` (verified) before the engine starts; "
        "image-volume: the model artifact mounted as a Kubernetes image volume (Kubernetes ≥ 1.31, oci:// only).",
    )
    agent_image: str | None = Field(
        None, description="Image with trainops that runs the model pull; default: the serving image."
    )
    verify_signature: SignatureKeyRef | None = Field(
        None,
        description="The init container verifies the release's model signature with this public key before it "
        "copies the model into /models (init-container delivery only).",
    )
    metrics: Literal["service-monitor", "annotations"] = Field(
        "service-monitor",
        description="How Prometheus finds the engine's /metrics: a ServiceMonitor (Prometheus Operator) "
        "or prometheus.io scrape annotations on the pods.",
    )
    gitops_path: RelativePath | None = Field(
        None, description="Directory of the serving objects in the GitOps repo; default: <gitops.path>-serve."
    )
    canary: Canary | None = None
    analysis: Analysis | None = None
    ab_test: ABTest | None = None
    gateway: GatewayRef | None = Field(None, description="Parent Gateway of the HTTPRoute (gateway-api).")
    disaggregation: Disaggregation | None = Field(
        None,
        description="Serve prefill and decode on separate pools, each release a pair routed by its own "
        "InferencePool (traffic gateway-api).",
    )

    def served_name(self, pipeline: str) -> str:
        """The model's name as the engine serves it: servedModelName, else the pipeline's."""
        return self.served_model_name or pipeline

    @field_validator("pinned_image")
    @classmethod
    def _by_digest(cls, value: str | None) -> str | None:
        if value is not None and "@sha256:" not in value:
            raise ValueError(f"{value!r} must be pinned by digest: NAME@sha256:<64 hex>")
        return value

    @field_validator("canary")
    @classmethod
    def _canary_is_split(cls, value: Canary | None, info: ValidationInfo) -> Canary | None:
        """KServe's Standard mode never reads canaryTrafficPercent: a canary there would be 100% at once."""
        standard = info.data.get("traffic") == "kserve" and info.data.get("kserve_deployment_mode") == "Standard"
        if value is not None and standard:
            raise ValueError(
                "kserveDeploymentMode Standard ignores canaryTrafficPercent (each release would take 100% at once): "
                "use kserveDeploymentMode Knative or traffic gateway-api, or remove canary"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RolloutSpec:
        if self.tensor_parallel * self.pipeline_parallel != self.gpus_per_replica:
            raise ValueError(
                f"tensorParallel × pipelineParallel ({self.tensor_parallel}×{self.pipeline_parallel}) "
                f"must equal gpusPerReplica ({self.gpus_per_replica})"
            )
        if self.gpus_per_replica > self.gpus_per_node and self.gpus_per_replica % self.gpus_per_node:
            raise ValueError(
                f"gpusPerReplica ({self.gpus_per_replica}) spans nodes: it must be a multiple of "
                f"gpusPerNode ({self.gpus_per_node})"
            )
        if self.gpus_per_replica > self.gpus_per_node and self.traffic != "gateway-api":
            raise ValueError(
                f"a replica larger than one node is a LeaderWorkerSet, which {self.traffic} cannot shift traffic "
                "between: use traffic gateway-api"
            )
        if self.traffic == "argo-rollouts" and self.ab_test is not None and self.gateway is None:
            raise ValueError("abTest with argo-rollouts routes headers through the Gateway API plugin: set gateway")
        if self.traffic == "kserve" and self.ab_test is not None:
            raise ValueError("kserve splits traffic by weight only: abTest needs argo-rollouts or gateway-api")
        if self.traffic == "gateway-api" and self.gateway is None:
            raise ValueError("traffic gateway-api needs gateway: the parent Gateway of the route")
        if self.analysis is not None and self.canary is None:
            raise ValueError("analysis runs during a canary: add canary steps")
        return self
