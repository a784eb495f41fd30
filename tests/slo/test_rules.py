"""The rendered rules pass `promtool check rules`, and their alerts pass `promtool test rules`:
the page fires on a canary's latency regression and stays silent within target."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.render.helpers import render, variant
from tests.rollout.helpers import rollout, tree
from trainops.slo.render import serving_rule_file_groups, training_rule_file_groups
from trainops_testing.services import require

EXAMPLE: dict[str, Any] = rollout({})
TTFT = "vllm:time_to_first_token_seconds"


def promtool() -> str:
    return require("promtool", "apt-get install -y prometheus")


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def test_every_rendered_rule_passes_promtool_check(tmp_path: Path) -> None:
    serving = tree(tmp_path / "serve", EXAMPLE)
    training = render(variant(tmp_path / "train"))
    rules = [o for o in [*serving.objects, *training.objects] if o["kind"] == "PrometheusRule"]
    assert len(rules) == 2
    for n, rule in enumerate(rules):
        path = tmp_path / f"rules-{n}.yml"
        path.write_text(yaml.safe_dump(rule["spec"]))
        result = check(path)
        assert result.returncode == 0, result.stdout + result.stderr
        count = sum(len(g["rules"]) for g in rule["spec"]["groups"])
        assert f"SUCCESS: {count} rules found" in result.stdout


def test_promtool_check_catches_a_broken_rule(tmp_path: Path) -> None:
    """The check above can fail: a rule with a PromQL error is refused."""
    serving = tree(tmp_path / "serve", EXAMPLE)
    spec = next(o for o in serving.objects if o["kind"] == "PrometheusRule")["spec"]
    spec["groups"][0]["rules"][0]["expr"] += " by"
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(spec))
    result = check(path)
    assert result.returncode != 0 and "parse error" in result.stdout + result.stderr


def _series(service: str, good: str, count: str) -> list[dict[str, str]]:
    labels = f'model_name="tiny-llm",service="tiny-llm-{service}"'
    return [
        {"series": f'{TTFT}_bucket{{{labels},le="1.0"}}', "values": good},
        {"series": f"{TTFT}_count{{{labels}}}", "values": count},
    ]


def _page(rule_file: dict[str, Any], slo: str, value: str) -> dict[str, Any]:
    """The page alert as promtool reports it: the rendered labels, the annotations with $value."""
    alert = next(r for g in rule_file["groups"] for r in g["rules"] if r.get("alert") == "SLOBurnRatePage"
                 and r["labels"]["slo"] == slo)  # fmt: skip
    annotations = {
        k: v.replace('{{ $value | printf "%.3g" }}', value).replace("{{ $value }}", value)
        for k, v in alert["annotations"].items()
    }
    labels = {**alert["labels"], "model_name": "tiny-llm", "service": "tiny-llm-canary"}
    return {"exp_labels": labels, "exp_annotations": annotations}


def run_unit_tests(tmp_path: Path, groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> str:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "test.yml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests})
    )
    result = subprocess.run([promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_page_fires_on_a_canary_regression_and_is_silent_within_target(tmp_path: Path) -> None:
    manifest = variant(tmp_path / "m", EXAMPLE)
    groups = serving_rule_file_groups(manifest, "tiny-llm")
    ttft = [g for g in groups if g["name"] == "slo-tiny-llm-ttft"]
    # 100 requests a minute each. Stable: 0.5% over 1 s all along (burn 0.5 of a 99% SLO).
    # Canary: within target for 10 minutes, then every request over 1 s (burn 100).
    stable = _series("stable", "0+99.5x120", "0+100x120")
    canary = _series("canary", "0+100x10 1000+0x110", "0+100x120")
    page = _page({"groups": ttft}, "tiny-llm-ttft", "100")
    tests = [
        {
            "interval": "1m",
            "input_series": stable + canary,
            "alert_rule_test": [
                {"eval_time": "9m", "alertname": "SLOBurnRatePage", "exp_alerts": []},
                # the 1h window entirely after the regression: the page, for the canary alone
                {"eval_time": "80m", "alertname": "SLOBurnRatePage", "exp_alerts": [page]},
            ],
        },
        {
            "interval": "1m",
            "input_series": stable,
            "alert_rule_test": [
                {"eval_time": f"{m}m", "alertname": name, "exp_alerts": []}
                for m in (5, 60, 119)
                for name in ("SLOBurnRatePage", "SLOBurnRateTicket")
            ],
        },
    ]
    assert "SUCCESS" in run_unit_tests(tmp_path, ttft, tests)


def test_page_fires_minutes_after_the_regression(tmp_path: Path) -> None:
    """Fast burn: with every request bad, the 1h/5m pair crosses 14.4 once 14.4% of the hour is
    bad — about nine minutes — long before the hour is over."""
    manifest = variant(tmp_path / "m", EXAMPLE)
    ttft = [g for g in serving_rule_file_groups(manifest, "tiny-llm") if g["name"] == "slo-tiny-llm-ttft"]
    canary = _series("canary", "0+100x10 1000+0x110", "0+100x120")
    tests = [{"interval": "1m", "input_series": canary, "alert_rule_test": [
        {"eval_time": "15m", "alertname": "SLOBurnRatePage", "exp_alerts": []},
    ]}]  # fmt: skip
    with pytest.raises(AssertionError, match="SLOBurnRatePage"):
        run_unit_tests(tmp_path, ttft, tests)  # it has fired by then: an empty expectation fails


def test_training_alerts_fire_on_a_stale_checkpoint(tmp_path: Path) -> None:
    manifest = variant(tmp_path / "m")
    groups = [g for g in training_rule_file_groups(manifest) if g["name"] == "slo-train-checkpoint-age"]
    labels = 'pipeline="tiny-llm",run="r1"'
    # checkpoint age climbs by a minute a minute and never resets: past 30m after half an hour
    series = [{"series": f"trainops_train_checkpoint_age_seconds{{{labels}}}", "values": "0+60x600"}]
    tests = [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "20m", "alertname": "SLOBurnRatePage", "exp_alerts": []},
    ]}]  # fmt: skip
    assert "SUCCESS" in run_unit_tests(tmp_path, groups, tests)
    late = [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "300m", "alertname": "SLOBurnRatePage", "exp_alerts": []},
    ]}]  # fmt: skip
    with pytest.raises(AssertionError, match="SLOBurnRatePage"):
        run_unit_tests(tmp_path, groups, late)


def test_the_analysis_templates_slo_queries_are_valid_promql(tmp_path: Path) -> None:
    serving = tree(tmp_path / "serve", EXAMPLE)
    template = next(o for o in serving.objects if o["kind"] == "AnalysisTemplate")
    queries = [
        m["provider"]["prometheus"]["query"] for m in template["spec"]["metrics"] if m["name"].startswith("slo-")
    ]
    assert len(queries) == 4  # availability, ttft, itl, goodput of the example
    rules = [{"record": f"check:q{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    result = check(path)
    assert result.returncode == 0, result.stdout + result.stderr
