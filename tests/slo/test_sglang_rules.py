"""The rendered SLO rules of an SGLang engine, evaluated by Prometheus on SGLang's own series
(trainops_testing.engine_metrics.SglangStandIn: SGLang's metric names, labels and bucket edges).

A canary whose first tokens come after the TTFT threshold and which aborts a fifth of its
requests is measured so, on the canary's series alone; the stable, within target, measures 0;
ITL, within target on both, measures 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.render.helpers import variant
from trainops.rollout.render import rule_file_of
from trainops_testing.engine_metrics import SglangStandIn
from trainops_testing.projects import slo_overlay
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, wait_for

SGLANG = {"engine": "sglang", "traffic": "gateway-api", "gateway": {"name": "inference", "namespace": "gateway"},
          "abTest": None}  # fmt: skip


def test_sglang_rules_measure_the_canary_on_sglangs_series(tmp_path: Path) -> None:
    slo = slo_overlay(f"http://{LOOPBACK}:9")["spec"]["slo"]
    manifest = variant(tmp_path / "m", {"spec": {"rollout": SGLANG, "slo": slo}})
    rules = rule_file_of(manifest)
    stable, canary = SglangStandIn(), SglangStandIn()
    canary.ttft = 2.0  # over the 1 s threshold (an SGLang bucket edge)
    canary.failed_per_scrape = canary.per_scrape // 5
    prometheus = Prometheus(tmp_path / "prom", targets={"tiny-llm-stable": [stable.target],
                                                        "tiny-llm-canary": [canary.target]}, rules=rules)  # fmt: skip
    try:
        prometheus.start()
    except ServiceError as err:
        stable.close()
        canary.close()
        pytest.fail(str(err), pytrace=False)
    try:

        def recorded() -> dict[tuple[str, str], float]:
            rows = prometheus.query("slo:sli_error:ratio_rate5s")
            return {(r["metric"]["slo"], r["metric"]["service"]): float(r["value"][1]) for r in rows}

        want = {
            (f"tiny-llm-{s}", f"tiny-llm-{t}") for s in ("availability", "ttft", "itl") for t in ("stable", "canary")
        }
        wait_for(lambda: want <= set(recorded()), timeout=60, what="every SLI recorded for the stable and the canary")
        # a window entirely after the first scrapes: the counters' rates are steady
        wait_for(lambda: recorded()[("tiny-llm-availability", "tiny-llm-canary")] == pytest.approx(0.2), timeout=30,
                 what="the canary's aborted fifth measured")  # fmt: skip
        sli = recorded()
        assert sli[("tiny-llm-ttft", "tiny-llm-canary")] == 1 and sli[("tiny-llm-ttft", "tiny-llm-stable")] == 0, sli
        assert sli[("tiny-llm-availability", "tiny-llm-stable")] == 0, sli
        assert sli[("tiny-llm-itl", "tiny-llm-canary")] == 0 and sli[("tiny-llm-itl", "tiny-llm-stable")] == 0, sli
    finally:
        prometheus.stop()
        stable.close()
        canary.close()
