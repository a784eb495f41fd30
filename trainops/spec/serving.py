"""Models of the rollout stage: the serving engine, traffic method, canary, analysis and A/B."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import Field, model_validator

from trainops.spec.common import CompareOp, Duration, Name, Percent, Quantity, StrictModel
from trainops.spec.stages import ImageSpec


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


class RolloutSpec(StrictModel):
    """Serving the released model, and how traffic moves to it."""

    engine: Literal["vllm", "sglang"] = "vllm"
    traffic: Literal["argo-rollouts", "gateway-api", "kserve"] = "argo-rollouts"
    model: str | None = Field(None, description="A model reference; default: what release publishes.")
    image: ImageSpec | None = Field(None, description="Serving image; default template: serve-<engine>.")
    namespace: Name | None = None
    replicas: int = Field(2, ge=1)
    gpus_per_replica: int = Field(1, ge=1, le=64)
    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    max_model_len: int | None = Field(None, ge=1)
    served_model_name: str | None = None
    engine_args: list[str] = Field(default_factory=list, description="Extra engine command-line flags.")
    port: int = Field(8000, ge=1, le=65535)
    cpu: Quantity | int | None = None
    memory: Quantity | None = None
    canary: Canary | None = None
    analysis: Analysis | None = None
    ab_test: ABTest | None = None
    gateway: GatewayRef | None = Field(None, description="Parent Gateway of the HTTPRoute (gateway-api).")

    @model_validator(mode="after")
    def _consistent(self) -> RolloutSpec:
        if self.tensor_parallel * self.pipeline_parallel != self.gpus_per_replica:
            raise ValueError(
                f"tensorParallel × pipelineParallel ({self.tensor_parallel}×{self.pipeline_parallel}) "
                f"must equal gpusPerReplica ({self.gpus_per_replica})"
            )
        if self.traffic == "kserve" and self.ab_test is not None:
            raise ValueError("kserve splits traffic by weight only: abTest needs argo-rollouts or gateway-api")
        if self.traffic == "gateway-api" and self.gateway is None:
            raise ValueError("traffic gateway-api needs gateway: the parent Gateway of the route")
        if self.analysis is not None and self.canary is None:
            raise ValueError("analysis runs during a canary: add canary steps")
        return self
