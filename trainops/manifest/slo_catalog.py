"""The SLOs of a manifest, resolved: every declared service level with its thresholds filled in
(MLPerf defaults made measurable on the engine's histogram), its window in seconds, and where
the manifest declares it. Checks that need the rest of the manifest are made here and returned
as (location, message) for trainops.manifest.load to place at the field's line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainops.manifest.common import duration_seconds
from trainops.manifest.pipeline import Pipeline
from trainops.manifest.slo import ServingSlo, window_seconds
from trainops.manifest.slo_engines import (
    ENGINES,
    Histogram,
    edge_at_or_below,
    is_edge,
    mlperf_row,
    nearest_edges,
    seconds_text,
)

SloKind = Literal["availability", "ttft", "itl", "e2e", "goodput", "ettr", "step-time", "checkpoint-age"]
Loc = tuple[str | int, ...]

# Burn-rate alert windows of the SRE workbook for a 30-day SLO: (severity, factor, long, short) in seconds.
MONTH = 30 * 86400
BURN_WINDOWS: tuple[tuple[str, float, int, int], ...] = (
    ("page", 14.4, 3600, 300),
    ("page", 6.0, 6 * 3600, 1800),
    ("ticket", 3.0, 86400, 2 * 3600),
    ("ticket", 1.0, 3 * 86400, 6 * 3600),
)


@dataclass(frozen=True)
class Slo:
    """One service level: `objective` % of good events over `window`."""

    name: str  # unique, DNS-label-like: <model>-<kind> or train-<kind>
    kind: SloKind
    subject: Literal["serving", "training"]
    objective: float  # percent
    window: str
    loc: Loc
    model: str | None = None
    threshold: float | None = None  # seconds (latency, step time, checkpoint age)
    histogram: Histogram | None = None  # latency SLIs
    extra: tuple[Histogram, float, Histogram, float] | None = None  # goodput: ttft and itl limits

    @property
    def budget(self) -> float:
        """The error budget as a ratio: 1 − objective."""
        return 1.0 - self.objective / 100.0

    @property
    def window_seconds(self) -> int:
        return window_seconds(self.window)

    def describe(self) -> str:
        what = {
            "availability": "requests not failed",
            "ttft": "requests with TTFT",
            "itl": "tokens with ITL",
            "e2e": "requests with end-to-end latency",
            "goodput": "requests meeting TTFT and ITL limits",
            "ettr": "effective training time",
            "step-time": "time with step time",
            "checkpoint-age": "time with checkpoint age",
        }[self.kind]
        limit = f" ≤ {seconds_text(self.threshold)}" if self.threshold is not None and self.kind != "goodput" else ""
        return f"{self.objective:g}% {what}{limit} over {self.window}"


@dataclass(frozen=True)
class Catalog:
    slos: list[Slo]
    problems: list[tuple[Loc, str]]

    def serving(self, model: str | None = None) -> list[Slo]:
        return [s for s in self.slos if s.subject == "serving" and (model is None or s.model == model)]

    def training(self) -> list[Slo]:
        return [s for s in self.slos if s.subject == "training"]

    def by_name(self, name: str) -> Slo | None:
        return next((s for s in self.slos if s.name == name), None)


def burn_windows(slo: Slo, *, scrape_seconds: float) -> list[tuple[str, float, int, int]]:
    """The workbook's windows scaled to the SLO's window, each at least four scrape intervals."""
    scale = slo.window_seconds / MONTH
    floor = int(4 * scrape_seconds)
    return [
        (severity, factor, max(floor, round(long * scale)), max(floor, round(short * scale)))
        for severity, factor, long, short in BURN_WINDOWS
    ]


def _model_names(pipeline: object) -> list[str]:
    assert isinstance(pipeline, Pipeline)
    rollout = pipeline.spec.rollout
    return [] if rollout is None else [rollout.served_name(pipeline.metadata.name)]


def _serving(entry: ServingSlo, index: int, engine: str, problems: list[tuple[Loc, str]]) -> list[Slo]:
    base: Loc = ("spec", "slo", "serving", index)
    metrics = ENGINES["vllm" if engine == "vllm" else "sglang"]
    out: list[Slo] = []
    if entry.availability is not None:
        out.append(Slo(f"{entry.model}-availability", "availability", "serving", entry.availability.objective,
                       entry.availability.window, (*base, "availability"), model=entry.model))  # fmt: skip
    reference, ttft_limit, tpot_limit = mlperf_row(entry.parameters_billions())
    limits: dict[str, tuple[Histogram, float]] = {}
    for i, latency in enumerate(entry.latency):
        histogram = metrics.latency[latency.metric]
        loc: Loc = (*base, "latency", i)
        if latency.threshold is None:
            if latency.metric == "e2e":
                problems.append(((*loc, "metric"), "e2e latency has no MLPerf default: set threshold"))
                continue
            mlperf = ttft_limit if latency.metric == "ttft" else tpot_limit
            threshold = edge_at_or_below(mlperf, histogram.buckets)
        else:
            threshold = duration_seconds(latency.threshold)
            if not is_edge(threshold, histogram.buckets):
                edges = " and ".join(seconds_text(e) for e in nearest_edges(threshold, histogram.buckets))
                problems.append(((*loc, "threshold"),
                    f"threshold {latency.threshold} is not a bucket edge of {engine}'s {histogram.name} "
                    f"(the SLI counts requests under an edge): the nearest edges are {edges}"))  # fmt: skip
                continue
        limits[latency.metric] = (histogram, threshold)
        out.append(Slo(f"{entry.model}-{latency.metric}", latency.metric, "serving", latency.objective,
                       latency.window, loc, model=entry.model, threshold=threshold, histogram=histogram))  # fmt: skip
    if entry.goodput is not None and "ttft" in limits and "itl" in limits:
        (ttft_h, ttft_t), (itl_h, itl_t) = limits["ttft"], limits["itl"]
        out.append(Slo(f"{entry.model}-goodput", "goodput", "serving", entry.goodput.objective, entry.goodput.window,
                       (*base, "goodput"), model=entry.model, extra=(ttft_h, ttft_t, itl_h, itl_t)))  # fmt: skip
    del reference
    return out


def resolve(pipeline: object) -> Catalog:
    """Every SLO of spec.slo, with the problems that keep any from being measured."""

    assert isinstance(pipeline, Pipeline)
    slo = pipeline.spec.slo
    slos: list[Slo] = []
    problems: list[tuple[Loc, str]] = []
    if slo is None:
        return Catalog(slos, problems)
    known = _model_names(pipeline)
    rollout = pipeline.spec.rollout
    for index, entry in enumerate(slo.serving):
        if entry.model not in known:
            served = f"the rollout serves {known[0]!r}" if known else "the manifest has no rollout section"
            problems.append((("spec", "slo", "serving", index, "model"), f"unknown model {entry.model!r}: {served}"))
            continue
        assert rollout is not None
        slos += _serving(entry, index, rollout.engine, problems)
    training = slo.training
    if training is not None:
        base: Loc = ("spec", "slo", "training")
        if pipeline.spec.train is None:
            problems.append((base, "training SLOs need a train section: add spec.train or remove slo.training"))
        else:
            if training.ettr is not None:
                slos.append(Slo("train-ettr", "ettr", "training", training.ettr.objective, training.ettr.window,
                                (*base, "ettr")))  # fmt: skip
            if training.step_time is not None:
                item = training.step_time
                slos.append(Slo("train-step-time", "step-time", "training", item.objective, item.window,
                                (*base, "stepTime"), threshold=duration_seconds(item.threshold)))  # fmt: skip
            if training.checkpoint_age is not None:
                item2 = training.checkpoint_age
                slos.append(Slo("train-checkpoint-age", "checkpoint-age", "training", item2.objective, item2.window,
                                (*base, "checkpointAge"), threshold=duration_seconds(item2.threshold)))  # fmt: skip
    return Catalog(slos, problems)


def mlperf_reference(entry: ServingSlo) -> str:
    """The MLPerf row an entry's default thresholds come from (for docs and status)."""
    return mlperf_row(entry.parameters_billions())[0]
