"""Canary analysis against Prometheus, with Argo Rollouts' meaning of interval, count and failureLimit.

Every `interval`, each threshold's PromQL is evaluated at /api/v1/query; a measurement
succeeds when the value satisfies `op value`. A threshold fails once its failed
measurements exceed `failureLimit` (the analysis stops there, as Argo Rollouts does);
the analysis passes when every threshold completes `count` measurements within the limit
(`count` unset: as many as fit in the step's pause, at least one).

Never blind: Prometheus unreachable (after three tries, each logged) is RemoteError; a
query that returns no data (no series, NaN) is GateFailedError — nothing is promoted
on no evidence. A query returning more than one series is an InputError (aggregate it).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainops.errors import GateFailedError, InputError, RemoteError
from trainops.manifest.common import compare, duration_seconds
from trainops.manifest.serving import Analysis, CanaryStep, Threshold
from trainops.retry import Backoff, RetryPolicy

log = logging.getLogger(__name__)
TIMEOUT = 10.0
TRIES = 3


@dataclass(frozen=True)
class Measurement:
    metric: str
    value: float
    ok: bool
    op: str
    threshold: float

    def text(self) -> str:
        verdict = "ok" if self.ok else "FAILED"
        return f"{self.metric}={self.value:g} (must be {self.op} {self.threshold:g}: {verdict})"


@dataclass(frozen=True)
class AnalysisOutcome:
    passed: bool
    measurements: list[Measurement] = field(default_factory=list)
    failed_metric: str | None = None

    def lines(self) -> list[str]:
        return [f"analysis: {m.text()}" for m in self.measurements]


def prometheus_query(
    url: str, query: str, *, consequence: str = "the canary cannot be analysed, nothing was promoted"
) -> dict[str, Any]:
    """The `data` of an instant query; a Prometheus that does not answer is retried (trainops.retry,
    said on stderr), then RemoteError saying `consequence`; a refused query is an InputError."""
    import requests  # lazy: loads requests

    backoff = Backoff(f"Prometheus {url}", policy=RetryPolicy(attempts=TRIES, base=1.0, cap=4.0))
    while True:
        try:
            response = requests.get(f"{url.rstrip('/')}/api/v1/query", params={"query": query}, timeout=TIMEOUT)
        except requests.RequestException as err:
            last = f"{type(err).__name__}: {err}"
        else:
            if response.status_code == 400:
                raise InputError(f"Prometheus refused the query {query!r}: {response.text[:200]}")
            if response.ok:
                data = response.json()
                if isinstance(data, dict) and data.get("status") == "success":
                    return dict(data.get("data") or {})
            last = f"HTTP {response.status_code}: {response.text[:200]}"
        if not backoff.wait(last):
            raise RemoteError(
                f"Prometheus {url} is unreachable ({last}): {consequence}",
                hint="check the Prometheus address in the manifest and that Prometheus is up",
            )


def query_value(url: str, threshold: Threshold) -> float:
    """The one number a threshold's PromQL yields now."""
    data = prometheus_query(url, threshold.query)
    kind, result = data.get("resultType"), data.get("result")
    raw: Any = None
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        raw = result[1]
    elif kind == "vector" and isinstance(result, list):
        if len(result) > 1:
            raise InputError(
                f"threshold {threshold.metric}: the query returned {len(result)} series, not one number",
                hint="aggregate it (sum, max, histogram_quantile … by (le))",
            )
        if result:
            raw = result[0].get("value", [None, None])[1]
    value = float(raw) if raw is not None else math.nan
    if math.isnan(value):
        raise GateFailedError(
            f"threshold {threshold.metric}: Prometheus returned no data for {threshold.query!r}; "
            "the canary cannot be judged, nothing was promoted",
            hint="check that Prometheus scrapes the engine's /metrics and that the canary takes traffic",
        )
    return value


def measurements_per_step(analysis: Analysis, step: CanaryStep) -> int:
    if analysis.count is not None:
        return analysis.count
    if isinstance(step.pause, str) and step.pause != "manual":
        return max(1, int(duration_seconds(step.pause) // duration_seconds(analysis.interval)))
    return 1


def run_analysis(analysis: Analysis, *, count: int, sleep: Callable[[float], None] = time.sleep) -> AnalysisOutcome:
    """Measure every threshold `count` times, `interval` apart; stop at the first threshold past its failure limit."""
    failures = {t.metric: 0 for t in analysis.thresholds}
    taken: list[Measurement] = []
    interval = duration_seconds(analysis.interval)
    for n in range(1, count + 1):
        for threshold in analysis.thresholds:
            value = query_value(analysis.prometheus, threshold)
            ok = compare(value, threshold.op, threshold.value)
            measured = Measurement(threshold.metric, value, ok, threshold.op, threshold.value)
            taken.append(measured)
            log.warning("analysis %d/%d: %s", n, count, measured.text())
            if not ok:
                failures[threshold.metric] += 1
                if failures[threshold.metric] > analysis.failure_limit:
                    return AnalysisOutcome(False, taken, threshold.metric)
        if n < count:
            log.warning("analysis: next measurement in %s", analysis.interval)
            sleep(interval)
    return AnalysisOutcome(True, taken)
