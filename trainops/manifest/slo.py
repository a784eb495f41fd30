"""`spec.slo`: service levels declared once — per served model and for training.

The shape only; what the engines export (metric names, histogram bucket edges) lives in
trainops.manifest.slo_engines, and what is rendered from an SLO (recording rules, burn-rate alerts,
monitors, dashboards) in trainops.slo. Checks that need the rest of the manifest (the model
named, the engine's histogram) are made after validation (trainops.manifest.load) and located at
the field's line like every other problem.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from trainops.manifest.common import SLO_WINDOW, Duration, StrictModel

SloWindow = Annotated[
    str,
    StringConstraints(pattern=SLO_WINDOW),
    Field(description="A compliance window: a whole number of minutes, hours, days or weeks (30d, 7d, 12h)."),
]
_WINDOW_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def window_seconds(value: str) -> int:
    """Seconds in an SloWindow (validated by its pattern)."""
    match = re.fullmatch(r"([0-9]+)(m|h|d|w)", value)
    assert match is not None, value
    return int(match.group(1)) * _WINDOW_SECONDS[match.group(2)]


def _objective(value: float) -> float:
    if not 0 < value < 100:
        raise ValueError(f"objective {value:g} is outside (0, 100) %: an SLO of 0 or 100 % has no error budget")
    return value


Objective = Annotated[
    float,
    AfterValidator(_objective),
    Field(description="Percent of good events (requests, time) the window must have, strictly between 0 and 100."),
]
ModelSize = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?[MB]$")]


def _positive_window(value: str) -> str:
    if window_seconds(value) <= 0:
        raise ValueError(f"window {value!r} is empty")
    return value


Window = Annotated[SloWindow, AfterValidator(_positive_window)]


class Availability(StrictModel):
    """Share of finished requests the engine did not abort or fail."""

    objective: Objective = 99.9
    window: Window = "30d"


class LatencySlo(StrictModel):
    """`objective` percent of requests within `threshold`: objective 99 and threshold 2s is P99 ≤ 2 s.

    The threshold must be a bucket edge of the engine's histogram (the SLI counts the requests
    in `le="threshold"`). Default threshold: the MLPerf Inference server-scenario limit for the
    model's size (P99 TTFT / P99 TPOT — llama3.1-8b 2000/100 ms for ≤ 8B, llama2-70b 2000/200 ms
    for ≤ 70B, llama3.1-405b 6000/175 ms above), rounded down to the engine's nearest edge; e2e
    has no MLPerf limit and needs a threshold."""

    metric: Literal["ttft", "itl", "e2e"] = Field(
        description="ttft: time to first token; itl: inter-token latency (TPOT, per output token); e2e: whole request."
    )
    objective: Objective = 99.0
    threshold: Duration | None = Field(None, description="Latency limit (100ms, 2s); default: MLPerf's, see above.")
    window: Window = "30d"


class Goodput(StrictModel):
    """Share of requests meeting both the TTFT and ITL limits of the model's latency SLOs. The
    engines count TTFT per request and ITL per token, so the SLI is the union-bound lower
    estimate 1 − (TTFT misses + ITL misses) — never better than the truth."""

    objective: Objective = 95.0
    window: Window = "30d"


class ServingSlo(StrictModel):
    """The service levels of one served model."""

    model: str = Field(min_length=1, description="The served model: rollout.servedModelName (default: metadata.name).")
    model_size: ModelSize | None = Field(
        None,
        description="Parameter count (8B, 70B, 405B, 125M): picks the MLPerf Inference server-scenario row "
        "the default latency thresholds come from; default: the ≤ 8B row.",
    )
    availability: Availability | None = Field(default_factory=Availability)
    latency: list[LatencySlo] = Field(
        default_factory=lambda: [LatencySlo(metric="ttft"), LatencySlo(metric="itl")],
        description="Latency SLOs; default: P99 TTFT and P99 ITL at MLPerf's limits.",
    )
    goodput: Goodput | None = None

    @model_validator(mode="after")
    def _one_per_metric(self) -> ServingSlo:
        metrics = [item.metric for item in self.latency]
        twice = sorted({m for m in metrics if metrics.count(m) > 1})
        if twice:
            raise ValueError(f"latency {twice[0]} is declared twice: one SLO per metric")
        if self.goodput is not None and not {"ttft", "itl"} <= set(metrics):
            raise ValueError("goodput counts requests meeting the ttft and itl limits: declare both latency SLOs")
        return self

    def parameters_billions(self) -> float:
        if self.model_size is None:
            return 8.0
        number = float(self.model_size[:-1])
        return number / 1000 if self.model_size.endswith("M") else number


class Ettr(StrictModel):
    """Effective training time ratio: productive time over wall time since the run started."""

    objective: Objective = 90.0
    window: Window = "7d"


class StepTime(StrictModel):
    """Share of the window during which the last step took at most `threshold`."""

    threshold: Duration = Field(description="Longest acceptable step time.")
    objective: Objective = 99.0
    window: Window = "7d"


class CheckpointAge(StrictModel):
    """Share of the window during which the last complete checkpoint is at most `threshold` old."""

    threshold: Duration = Field("1h", description="Oldest acceptable last complete checkpoint.")
    objective: Objective = 99.0
    window: Window = "7d"


class TrainingSlo(StrictModel):
    """The service levels of training runs, measured from the supervisor's metrics."""

    ettr: Ettr | None = Field(default_factory=Ettr)
    step_time: StepTime | None = None
    checkpoint_age: CheckpointAge | None = Field(default_factory=CheckpointAge)


class SloSpec(StrictModel):
    """Service levels: each recorded, alerted on by burn rate and shown on a dashboard, and the
    gate of every canary promotion.

    Burn-rate alerts follow the SRE workbook's table for a 30-day window — page at 14.4× over
    1 h and 5 min, or 6× over 6 h and 30 min; ticket at 3× over 1 d and 2 h, or 1× over 3 d and
    6 h — scaled to each SLO's window (a 7d SLO pages at 14.4× over 14 min and 70 s) and never
    shorter than four scrape intervals."""

    prometheus: str = Field(
        "http://prometheus.monitoring.svc:9090",
        pattern=r"^https?://",
        description="Prometheus that `slo status` and promotion read.",
    )
    scrape_interval: Duration = Field("30s", description="Interval of the rendered ServiceMonitor and PodMonitor.")
    evaluation_interval: Duration = Field("30s", description="Interval of the rendered rule groups.")
    canary_window: Duration = Field(
        "5m",
        description="The window a canary step is judged over by the SLOs (`rollout promote --auto`, the "
        "AnalysisTemplate) when the step has no pause duration; with one, the pause.",
    )
    serving: list[ServingSlo] = Field(default_factory=list)
    training: TrainingSlo | None = None

    @model_validator(mode="after")
    def _unique_models(self) -> SloSpec:
        models = [item.model for item in self.serving]
        twice = sorted({m for m in models if models.count(m) > 1})
        if twice:
            raise ValueError(f"model {twice[0]!r} has two serving entries: one per model")
        return self
