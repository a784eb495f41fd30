"""What each serving engine exports for the service levels: metric names and histogram buckets.

The bucket edges are the engines' own (the `buckets=` of each Histogram in vLLM's
vllm/v1/metrics/loggers.py and SGLang's python/sglang/srt/metrics/collector.py, their
defaults), because a latency SLI counts the requests under a bucket edge
(`…_bucket{le="EDGE"}`): a threshold between two edges cannot be measured, only interpolated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LatencyMetric = Literal["ttft", "itl", "e2e"]
Engine = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class Histogram:
    name: str  # without _bucket/_count
    buckets: tuple[float, ...]  # seconds, the le= edges (without +Inf)


@dataclass(frozen=True)
class EngineMetrics:
    """The series an engine exports, by role."""

    engine: Engine
    latency: dict[LatencyMetric, Histogram]
    requests_total: str  # every finished request (PromQL selector, label filters included)
    requests_failed: str  # the counter of requests that failed (aborted, errored)
    failed_matchers: str  # the label matchers that pick the failures in it
    model_label: str  # the label carrying the served model name


_VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
              20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
_VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
             20.0, 40.0, 80.0)  # fmt: skip
_VLLM_E2E = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
             480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
_SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                400.0)  # fmt: skip
_SGLANG_ITL = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
               0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip
_SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
               400.0, 600.0, 1200.0, 1800.0, 2400.0)  # fmt: skip

ENGINES: dict[Engine, EngineMetrics] = {
    "vllm": EngineMetrics(
        engine="vllm",
        latency={
            "ttft": Histogram("vllm:time_to_first_token_seconds", _VLLM_TTFT),
            "itl": Histogram("vllm:inter_token_latency_seconds", _VLLM_ITL),
            "e2e": Histogram("vllm:e2e_request_latency_seconds", _VLLM_E2E),
        },
        # vLLM counts each finished request by finished_reason (stop, length, abort, error)
        requests_total="vllm:request_success_total",
        requests_failed="vllm:request_success_total",
        failed_matchers='finished_reason=~"abort|error"',
        model_label="model_name",
    ),
    "sglang": EngineMetrics(
        engine="sglang",
        latency={
            "ttft": Histogram("sglang:time_to_first_token_seconds", _SGLANG_TTFT),
            "itl": Histogram("sglang:inter_token_latency_seconds", _SGLANG_ITL),
            "e2e": Histogram("sglang:e2e_request_latency_seconds", _SGLANG_E2E),
        },
        requests_total="sglang:num_requests_total",
        requests_failed="sglang:num_aborted_requests_total",
        failed_matchers="",
        model_label="model_name",
    ),
}

# MLPerf Inference, server scenario: P99 TTFT / P99 TPOT limits in seconds by reference model.
MLPERF_SERVER: tuple[tuple[float, str, float, float], ...] = (
    # (largest parameter count in billions the row stands for, reference model, TTFT, TPOT)
    (8.0, "llama3.1-8b", 2.0, 0.1),
    (70.0, "llama2-70b", 2.0, 0.2),
    (float("inf"), "llama3.1-405b", 6.0, 0.175),
)


def is_edge(value: float, buckets: tuple[float, ...]) -> bool:
    return any(abs(value - edge) <= 1e-9 * max(1.0, edge) for edge in buckets)


def nearest_edges(value: float, buckets: tuple[float, ...]) -> list[float]:
    """The edges either side of value (one at the ends)."""
    below = [edge for edge in buckets if edge < value]
    above = [edge for edge in buckets if edge > value]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def edge_at_or_below(value: float, buckets: tuple[float, ...]) -> float:
    """The largest edge ≤ value (the smallest edge when all are above): a limit made measurable
    without loosening it."""
    below = [edge for edge in buckets if edge <= value + 1e-12]
    return below[-1] if below else buckets[0]


def mlperf_row(parameters_billions: float) -> tuple[str, float, float]:
    """The MLPerf server-scenario reference for a model size: (reference model, TTFT, TPOT)."""
    for ceiling, name, ttft, tpot in MLPERF_SERVER:
        if parameters_billions <= ceiling:
            return name, ttft, tpot
    raise AssertionError("the last row has no ceiling")


def seconds_text(value: float) -> str:
    """A bucket edge as a manifest duration: 100ms, 2500ms, 2s."""
    ms = round(value * 1000, 6)
    if ms >= 1000 and ms % 1000 == 0:
        return f"{int(ms // 1000)}s"
    if ms == int(ms):
        return f"{int(ms)}ms"
    return f"{value:g}s"
