"""`trainops slo status`: each SLO's SLI now, error budget left and burn rates, read from Prometheus.

Everything is read from the recording rules trainops renders (trainops.slo.rules), one query per
SLO (`{__name__=~"slo:sli_error:ratio_rate.+", slo="NAME"}`), so what status shows is what the
alerts see. Per series (a model's Service — canary, stable — or a run):

- SLI now: 1 − the error ratio over the shortest alert window;
- budget left: 1 − (error ratio over the SLO's window) / error budget (negative: overspent);
- burn rates: error ratio / budget over every window the alerts read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainops.errors import InputError
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.slo_catalog import Slo, resolve
from trainops.rollout.analysis import prometheus_query
from trainops.slo.rules import RECORD, windows_of

_KEEP = ("model_name", "service", "run")


@dataclass(frozen=True)
class BurnRate:
    window: str
    burn_rate: float


@dataclass(frozen=True)
class SeriesStatus:
    labels: dict[str, str]
    sli_now: float | None
    budget_left: float | None
    burn_rates: list[BurnRate]  # over every window the alerts read


@dataclass(frozen=True)
class SloStatus:
    slo: str
    kind: str
    objective: float
    window: str
    description: str
    series: list[SeriesStatus] = field(default_factory=list)


@dataclass(frozen=True)
class StatusReport:
    prometheus: str
    slos: list[SloStatus]


def _number(raw: object) -> float | None:
    try:
        value = float(str(raw))
    except ValueError:
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def slo_status(slo: Slo, *, url: str, scrape_seconds: float) -> SloStatus:
    windows = windows_of(slo, scrape_seconds)
    query = f'{{__name__=~"{RECORD}.+",slo="{slo.name}"}}'
    data = prometheus_query(url, query, consequence="the SLOs' status cannot be read")
    by_series: dict[tuple[tuple[str, str], ...], dict[str, float | None]] = {}
    for item in data.get("result") or []:
        metric = dict(item.get("metric") or {})
        window = str(metric.get("__name__", "")).removeprefix(RECORD)
        key = tuple(sorted((k, v) for k, v in metric.items() if k in _KEEP))
        by_series.setdefault(key, {})[window] = _number((item.get("value") or [None, None])[1])
    series = []
    for key, ratios in sorted(by_series.items()):
        short, whole = windows[1], windows[-1]
        now = ratios.get(short)
        spent = ratios.get(whole)
        burns = [BurnRate(w, r / slo.budget) for w in windows[:-1] if (r := ratios.get(w)) is not None]
        series.append(SeriesStatus(
            labels=dict(key),
            sli_now=None if now is None else 1 - now,
            budget_left=None if spent is None else 1 - spent / slo.budget,
            burn_rates=burns,
        ))  # fmt: skip
    return SloStatus(slo.name, slo.kind, slo.objective, slo.window, slo.describe(), series)


def status(manifest: Manifest, *, prometheus: str | None = None) -> StatusReport:
    """Every SLO of the manifest as Prometheus has it now (RemoteError when it cannot be asked)."""

    spec = manifest.pipeline.spec.slo
    if spec is None:
        raise InputError(f"{manifest.path.name} declares no service levels", hint="add spec.slo (serving, training)")
    url = prometheus or spec.prometheus
    scrape = duration_seconds(spec.scrape_interval)
    catalog = resolve(manifest.pipeline)
    return StatusReport(url, [slo_status(s, url=url, scrape_seconds=scrape) for s in catalog.slos])
