"""The SLOs of a disaggregated canary, for real: vLLM stand-ins for the prefill and decode pods of
both pairs, each labelled as the rendered SLO ServiceMonitor would label what it scrapes
(trainops_testing.serving_metrics.monitor_targets follows the monitor to the Services it selects
and to their pods), scraped by Prometheus evaluating the rendered PrometheusRule, and the canary
gate (`rollout promote --auto`'s judgement) asking the same Prometheus.

Each SLI reads its pool of the pair: TTFT the prefill's, ITL the decode's, availability both
(trainops.slo.rules). A canary whose prefill is slow fails TTFT and pages; one whose decode is
slow fails ITL and not TTFT; a healthy one passes every SLO and raises nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import variant
from tests.rollout.helpers import CANARY
from tests.rollout.test_disagg import CASES
from trainops.errors import GateFailedError
from trainops.manifest import Manifest
from trainops.manifest.disagg import LABEL_ROLE
from trainops.rollout.context import LABEL_TRACK, serve_context
from trainops.rollout.render import build_tree
from trainops.rollout.slo_gate import SloJudgement, judge
from trainops_testing.engine_metrics import VllmStandIn
from trainops_testing.projects import slo_overlay
from trainops_testing.prometheus import Prometheus
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for
from trainops_testing.serving_metrics import monitor_targets

WINDOW = 3.0  # spec.slo.canaryWindow of the overlay


@dataclass
class Pairs:
    manifest: Manifest
    prometheus: Prometheus
    engines: dict[tuple[str, str], VllmStandIn]  # (track, role) → the stand-in of those pods
    labels: dict[tuple[str, str], dict[str, str]]  # what their series carry

    def judged(self, until: Callable[[dict[str, SloJudgement]], bool], what: str) -> dict[str, SloJudgement]:
        """The gate's judgements once `until` holds of them (a loaded machine may miss a scrape of the
        short window, and the gate then says it has no data)."""
        seen: dict[str, SloJudgement] = {}

        def ready() -> bool:
            try:
                seen.update({j.slo: j for j in judge(self.manifest, window_seconds=WINDOW)})
            except GateFailedError:
                return False
            return until(seen)

        wait_for(ready, timeout=60, what=what)
        return seen

    def recorded(self, slo: str, service: str) -> float | None:
        rows = self.prometheus.query(f'slo:sli_error:ratio_rate5s{{slo="{slo}",service="{service}"}}')
        return float(rows[0]["value"][1]) if rows else None


@pytest.fixture
def pairs(tmp_path: Path) -> Iterator[Pairs]:
    port = free_port()
    case = CASES["vllm-disaggregated-set"]
    data: dict[str, Any] = {"spec": {**case["spec"], "slo": slo_overlay(f"http://{LOOPBACK}:{port}")["spec"]["slo"]}}
    manifest = variant(tmp_path / "p", data)
    objects = build_tree(serve_context(manifest), CANARY).objects
    rule = next(o for o in objects if o["kind"] == "PrometheusRule" and o["metadata"]["name"] == "tiny-llm-slo")
    targets = monitor_targets(objects, "tiny-llm-slo")
    engines: dict[tuple[str, str], VllmStandIn] = {}
    labels: dict[tuple[str, str], dict[str, str]] = {}
    groups = []
    for pod, scraped in targets:
        key = (pod[LABEL_TRACK], pod[LABEL_ROLE])
        engine = engines.setdefault(key, VllmStandIn())
        labels[key] = scraped
        groups.append({"targets": [engine.target], "labels": scraped})
    prometheus = Prometheus(tmp_path / "prom", file_sd=True, rules={"groups": rule["spec"]["groups"]}, port=port)
    try:
        prometheus.start()
    except ServiceError as err:
        for engine in engines.values():
            engine.close()
        pytest.fail(str(err), pytrace=False)
    prometheus.set_targets(groups)
    yield Pairs(manifest, prometheus, engines, labels)
    prometheus.stop()
    for engine in engines.values():
        engine.close()


def test_the_monitor_reaches_both_pools_of_both_tracks_and_says_which(pairs: Pairs) -> None:
    assert sorted(pairs.engines) == [(t, r) for t in ("canary", "stable") for r in ("decode", "prefill")]
    for (track, role), scraped in pairs.labels.items():
        # the labels the rules and the gate select on: the track's Service and the pool
        assert scraped == {"service": f"tiny-llm-{track}", "role": role}


def _wait_recorded(pairs: Pairs, slo: str) -> None:
    wait_for(lambda: all(pairs.recorded(slo, f"tiny-llm-{t}") is not None for t in ("stable", "canary")),
             timeout=60, what=f"{slo} recorded for the stable and the canary")  # fmt: skip


def _firing(pairs: Pairs, slo: str) -> list[str]:
    rows = pairs.prometheus.query(f'ALERTS{{alertname="SLOBurnRatePage",slo="{slo}",alertstate="firing"}}')
    return sorted(r["metric"].get("service", "") for r in rows)


def test_a_slow_canary_prefill_fails_ttft_and_pages(pairs: Pairs) -> None:
    pairs.engines["canary", "prefill"].ttft = 2.5  # every canary prompt over the 1 s TTFT threshold
    wait_for(lambda: _firing(pairs, "tiny-llm-ttft") == ["tiny-llm-canary"], timeout=60,
             what="the canary's TTFT page")  # fmt: skip
    _wait_recorded(pairs, "tiny-llm-ttft")
    assert pairs.recorded("tiny-llm-ttft", "tiny-llm-stable") == 0
    judged = pairs.judged(lambda j: not j["tiny-llm-ttft"].ok, "the gate failing the canary's TTFT")
    ttft = judged["tiny-llm-ttft"]
    assert not ttft.ok and ttft.canary_sli == 0 and ttft.stable_burn == 0, ttft.text()
    assert judged["tiny-llm-itl"].ok and judged["tiny-llm-availability"].ok


def test_a_slow_canary_decode_fails_itl_not_ttft(pairs: Pairs) -> None:
    decode = pairs.engines["canary", "decode"]
    decode.itl = 0.5  # every token over the 100 ms ITL threshold
    decode.ttft = 2.5  # the decode's own first step (after the KV transfer): not the TTFT SLI
    wait_for(lambda: _firing(pairs, "tiny-llm-itl") == ["tiny-llm-canary"], timeout=60,
             what="the canary's ITL page")  # fmt: skip
    _wait_recorded(pairs, "tiny-llm-ttft")
    judged = pairs.judged(lambda j: not j["tiny-llm-itl"].ok, "the gate failing the canary's ITL")
    assert judged["tiny-llm-ttft"].ok and judged["tiny-llm-ttft"].canary_sli == 1, judged["tiny-llm-ttft"].text()
    assert _firing(pairs, "tiny-llm-ttft") == []


def test_failed_prefills_count_against_availability(pairs: Pairs) -> None:
    prefill = pairs.engines["canary", "prefill"]
    prefill.failed_per_scrape = prefill.per_scrape // 2  # the decode never sees these requests
    judged = pairs.judged(lambda j: not j["tiny-llm-availability"].ok, "the gate failing the canary's availability")
    availability = judged["tiny-llm-availability"]
    assert availability.canary_sli == pytest.approx(0.5), availability.text()
    assert judged["tiny-llm-ttft"].ok and judged["tiny-llm-itl"].ok


def test_a_healthy_canary_passes_every_slo_and_raises_nothing(pairs: Pairs) -> None:
    for slo in ("tiny-llm-availability", "tiny-llm-ttft", "tiny-llm-itl"):
        _wait_recorded(pairs, slo)
    judged = pairs.judged(lambda j: len(j) == 3, "the gate's three judgements")
    assert sorted(judged) == ["tiny-llm-availability", "tiny-llm-itl", "tiny-llm-ttft"]
    for judgement in judged.values():
        assert judgement.ok and judgement.canary_sli == 1, judgement.text()
    assert pairs.prometheus.query('ALERTS{alertstate="firing"}') == []
