"""Prometheus rules from the SLO catalog: recording rules per SLI and multi-window, multi-burn-rate alerts.

For every SLO, one rule group `slo-<name>`:

    slo:sli_error:ratio_rate<W>   the share of bad events over each window W the alerts use
                                  (and over the SLO's whole window, for the budget left)
    SLOBurnRatePage               severity page: burn > 14.4 over the long and short windows of
                                  the first pair, or > 6 over the second
    SLOBurnRateTicket             severity ticket: > 3 or > 1 over the third and fourth pairs
                                  (the SRE workbook's table; windows scaled to the SLO's,
                                  trainops.manifest.slo_catalog)

Burn rate = error ratio / error budget (1 − objective): 1 spends the budget exactly over the
window. Each alert's value is the long window's burn rate; its labels name the SLO, the
pipeline, the model and Service (serving) or the run (training); its annotations carry the
evidence query. Serving SLIs count per model and per Service, so the canary's SLI and burn
rate are its own (`service="<name>-canary"`) and the stable's its own.

Disaggregated serving (rollout.disaggregation): every series also says which pool of the pair
it came from (`role="prefill"` / `"decode"`, the pod's `llm-d.ai/role`, trainops.slo.render),
and each SLI reads the pool where its events happen (`POOL_OF`):

    ttft          the prefill pool: it computes the prompt and the first token, so a slower
                  prefill (the usual TTFT regression) shows there whole; the KV transfer and
                  the decode's first step are not in it
    itl, e2e      the decode pool: it makes every later token and finishes the request (the
                  prefill pool's requests stop after their first token, with no inter-token
                  latency); e2e runs from the request's arrival at the decode pool
    availability  both: a request is served when its prefill and its decode succeed, so the
                  error ratio is the prefill's plus the decode's (at most 1)
    goodput       the prefill's TTFT errors plus the decode's ITL errors (at most 1)

Summing one pool's events with the other's would count every request twice and halve a
regression of either pool.

Training SLIs are over time, from the supervisor's gauges (trainops.slo.exporter): a
`trainops:slo_good:instant` rule records 1 when the run is within the SLO now, and the error
ratio over W is 1 − its average over W (no subqueries).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainops.manifest.common import duration_seconds
from trainops.manifest.slo import SloSpec
from trainops.manifest.slo_catalog import Catalog, Slo, burn_windows
from trainops.manifest.slo_engines import ENGINES, Histogram

RECORD = "slo:sli_error:ratio_rate"
GOOD_NOW = "trainops:slo_good:instant"
ALERTS = {"page": "SLOBurnRatePage", "ticket": "SLOBurnRateTicket"}
SERVING_BY = ("model_name", "service")
TRAINING_BY = ("pipeline", "run")
# what the supervisor exports (trainops.slo.exporter)
TRAIN_STEP = "trainops_train_step_seconds"
TRAIN_CKPT_AGE = "trainops_train_checkpoint_age_seconds"
TRAIN_ETTR = "trainops_train_ettr"
POOL_LABEL = "role"  # disaggregated serving: the pool of the pair a series came from
POOLS = ("prefill", "decode")
POOL_OF = {"ttft": "prefill", "itl": "decode", "e2e": "decode"}


def promql_duration(seconds: float) -> str:
    """A PromQL duration: 3600 → 1h, 70 → 1m10s, 86400 → 1d."""
    total = max(1, round(seconds))
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            out += f"{total // size}{unit}"
            total %= size
    return out


def le_matcher(edge: float) -> str:
    """The `le` matcher of a bucket edge as exporters write it (prometheus_client: 1.0, 0.1) or as
    Prometheus ≥ 3 normalises it (1)."""
    forms = {repr(float(edge)), f"{edge:g}"}
    if len(forms) == 1:
        return f'le="{forms.pop()}"'
    return 'le=~"' + "|".join(sorted(f.replace(".", "\\\\.") for f in forms)) + '"'


@dataclass(frozen=True)
class Selectors:
    """The label matchers of each subject's series, without braces."""

    serving: dict[str, str]  # model → matchers
    pipeline: str
    pools: bool = False  # disaggregated serving: each SLI reads its pool of the pair


def serving_matchers(model: str, *, service_regex: str | None) -> str:
    parts = [f'model_name="{model}"']
    if service_regex:
        parts.append(f'service=~"{service_regex}"')
    return ",".join(parts)


def _join(*matchers: str) -> str:
    return ",".join(m for m in matchers if m)


def _by(labels: tuple[str, ...]) -> str:
    return f"sum by ({', '.join(labels)})"


def _latency_error(histogram: Histogram, threshold: float, matchers: str, window: str) -> str:
    by = _by(SERVING_BY)
    good = f"{by} (rate({histogram.name}_bucket{{{_join(matchers, le_matcher(threshold))}}}[{window}]))"
    total = f"{by} (rate({histogram.name}_count{{{matchers}}}[{window}]))"
    return f"1 - ({good} / {total})"


def _pool(matchers: str, pool: str | None) -> str:
    return _join(matchers, f'{POOL_LABEL}="{pool}"') if pool else matchers


def _availability_error(engine: str, matchers: str, window: str) -> str:
    by = _by(SERVING_BY)
    metrics = ENGINES["vllm" if engine == "vllm" else "sglang"]
    failed = f"{by} (rate({metrics.requests_failed}{{{_join(matchers, metrics.failed_matchers)}}}[{window}]))"
    total = f"{by} (rate({metrics.requests_total}{{{matchers}}}[{window}]))"
    return f"({failed} or {total} * 0) / {total}"


def error_ratio(slo: Slo, *, engine: str, matchers: str, window: str, pools: bool = False) -> str:
    """PromQL for the SLO's share of bad events over `window` (the recording rule's expression).
    With `pools` (disaggregated serving) each SLI reads its pool of the pair (module docstring)."""
    if slo.kind == "availability":
        if not pools:
            return _availability_error(engine, matchers, window)
        prefill, decode = (_availability_error(engine, _pool(matchers, p), window) for p in POOLS)
        return f"clamp_max(({prefill}) + ({decode}), 1)"
    if slo.kind in ("ttft", "itl", "e2e"):
        assert slo.histogram is not None and slo.threshold is not None
        own = _pool(matchers, POOL_OF[slo.kind] if pools else None)
        return _latency_error(slo.histogram, slo.threshold, own, window)
    if slo.kind == "goodput":
        assert slo.extra is not None
        ttft_h, ttft_t, itl_h, itl_t = slo.extra
        ttft = _latency_error(ttft_h, ttft_t, _pool(matchers, POOL_OF["ttft"] if pools else None), window)
        itl = _latency_error(itl_h, itl_t, _pool(matchers, POOL_OF["itl"] if pools else None), window)
        return f"clamp_max(({ttft}) + ({itl}), 1)"
    own = _join(f'slo="{slo.name}"', matchers)
    return f"1 - avg_over_time({GOOD_NOW}{{{own}}}[{window}])"


def good_now(slo: Slo, *, matchers: str) -> str | None:
    """Training SLIs: 1 when the run is within the SLO at this evaluation, else 0."""
    by = f"max by ({', '.join(TRAINING_BY)})"
    if slo.kind == "ettr":
        return f"{by} ({TRAIN_ETTR}{{{matchers}}}) >= bool {slo.objective / 100:g}"
    if slo.kind == "step-time":
        return f"{by} ({TRAIN_STEP}{{{matchers}}}) <= bool {slo.threshold:g}"
    if slo.kind == "checkpoint-age":
        return f"{by} ({TRAIN_CKPT_AGE}{{{matchers}}}) <= bool {slo.threshold:g}"
    return None


def windows_of(slo: Slo, scrape_seconds: float) -> list[str]:
    """Every window a rule of the SLO reads: the burn-rate pairs' and the SLO's own."""
    seen: list[str] = []
    for _, _, long, short in burn_windows(slo, scrape_seconds=scrape_seconds):
        for seconds in (long, short):
            text = promql_duration(seconds)
            if text not in seen:
                seen.append(text)
    whole = promql_duration(slo.window_seconds)
    return [*seen, whole] if whole not in seen else seen


def burn_expr(slo: Slo, factor: float, long: str, short: str) -> str:
    budget = f"{slo.budget:g}"
    return (
        f'({RECORD}{long}{{slo="{slo.name}"}} / {budget} > {factor:g}'
        f' and {RECORD}{short}{{slo="{slo.name}"}} / {budget} > {factor:g})'
    )


def evidence_query(slo: Slo, long: str) -> str:
    """The burn rate of the SLO over the alert's long window, as an operator would query it."""
    return f'{RECORD}{long}{{slo="{slo.name}"}} / {slo.budget:g}'


def rule_group(
    slo: Slo, spec: SloSpec, *, engine: str, matchers: str, pipeline: str, pools: bool = False
) -> dict[str, Any]:
    """The recording rules and the two alerts (page, ticket) of one SLO."""
    scrape = duration_seconds(spec.scrape_interval)
    static = {"slo": slo.name, "pipeline": pipeline} if slo.subject == "serving" else {"slo": slo.name}
    rules: list[dict[str, Any]] = []
    if slo.subject == "training":
        expr = good_now(slo, matchers=matchers)
        assert expr is not None
        rules.append({"record": GOOD_NOW, "expr": expr, "labels": dict(static)})
        matchers = ""  # the instant rule already selected the run's series
    for window in windows_of(slo, scrape):
        rules.append({"record": f"{RECORD}{window}", "expr": error_ratio(slo, engine=engine, matchers=matchers,
                      window=window, pools=pools), "labels": dict(static)})  # fmt: skip
    pairs = burn_windows(slo, scrape_seconds=scrape)
    for severity in ("page", "ticket"):
        mine = [(f, promql_duration(lg), promql_duration(sh)) for sev, f, lg, sh in pairs if sev == severity]
        expr = " or ".join(burn_expr(slo, f, lg, sh) for f, lg, sh in mine)
        _first_factor, first_long, first_short = mine[0]
        rules.append(
            {
                "alert": ALERTS[severity],
                "expr": expr,
                "labels": {
                    **static,
                    "severity": severity,
                    "objective": f"{slo.objective:g}",
                    "window": slo.window,
                    "long_window": first_long,
                    "short_window": first_short,
                },
                "annotations": {
                    "summary": f"{slo.name} burns its error budget ({slo.describe()})",
                    "description": 'burn rate {{ $value | printf "%.3g" }} over the long window '
                    + ", ".join(f"(> {f:g} over {lg} and {sh})" for f, lg, sh in mine),
                    "burn_rate": "{{ $value }}",
                    "query": evidence_query(slo, first_long),
                },
            }
        )
    return {"name": f"slo-{slo.name}", "interval": spec.evaluation_interval, "rules": rules}


def rule_groups(
    catalog: Catalog, spec: SloSpec, *, engine: str, selectors: Selectors, subject: str, training_matchers: str = ""
) -> list[dict[str, Any]]:
    """The rule groups of the catalog's serving or training SLOs."""
    groups = []
    for slo in catalog.slos:
        if slo.subject != subject:
            continue
        matchers = selectors.serving.get(slo.model or "", "") if subject == "serving" else training_matchers
        groups.append(rule_group(slo, spec, engine=engine, matchers=matchers, pipeline=selectors.pipeline,
                                 pools=selectors.pools and subject == "serving"))  # fmt: skip
    return groups


def rule_file(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """A Prometheus rule file (what promtool checks and a plain Prometheus loads)."""
    return {"groups": groups}
