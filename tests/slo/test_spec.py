"""spec.slo: declared, defaulted from MLPerf, and every mistake reported at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import ManifestError
from trainops.manifest import load_manifest
from trainops.manifest.slo_catalog import resolve
from trainops.manifest.slo_engines import ENGINES
from trainops_testing.cli import run

HEADER = """apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: demo}
spec:
  train: {scheduler: local, command: [python, -c, pass], nodes: 1, gpusPerNode: 0}
  release: {source: "file://x:tag"}
  rollout: {engine: ENGINE, servedModelName: tiny-llm}
  slo:
"""  # the slo body starts at line 9


def write(tmp_path: Path, body: str, engine: str = "vllm") -> Path:
    path = tmp_path / "trainops.yaml"
    path.write_text(HEADER.replace("ENGINE", engine) + body)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    return [f"{p.line}:{p.column}: {p.path}: {p.message}" for p in caught.value.problems]


def test_defaults_come_from_mlperf_rounded_down_to_the_engines_edges(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, "    serving: [{model: tiny-llm}]\n    training: {}\n"))
    slos = {s.name: s for s in resolve(manifest.pipeline).slos}
    # MLPerf llama3.1-8b: P99 TTFT 2000 ms, P99 TPOT 100 ms; vLLM's TTFT edges around 2 s are 1 and 2.5
    assert slos["tiny-llm-ttft"].threshold == 1.0 and slos["tiny-llm-ttft"].objective == 99
    assert slos["tiny-llm-itl"].threshold == 0.1
    assert slos["tiny-llm-availability"].objective == 99.9
    assert sorted(slos) == ["tiny-llm-availability", "tiny-llm-itl", "tiny-llm-ttft", "train-checkpoint-age",
                            "train-ettr"]  # fmt: skip


def test_a_larger_model_takes_its_mlperf_row_on_sglang(tmp_path: Path) -> None:
    body = "    serving: [{model: tiny-llm, modelSize: 405B}]\n"
    manifest = load_manifest(write(tmp_path, body, engine="sglang"))
    slos = {s.name: s for s in resolve(manifest.pipeline).slos}
    # llama3.1-405b: 6000 / 175 ms; SGLang has a 6 s TTFT edge, and 150 ms is none of its ITL edges (100, 200)
    assert slos["tiny-llm-ttft"].threshold == 6.0
    assert slos["tiny-llm-itl"].threshold == 0.1
    assert slos["tiny-llm-ttft"].histogram == ENGINES["sglang"].latency["ttft"]


def test_every_mistake_at_its_line(tmp_path: Path) -> None:
    body = (
        "    serving:\n"
        "      - model: tiny-llm\n"  # 10
        "        latency:\n"
        "          - {metric: ttft, threshold: 2s}\n"  # 12
        "          - {metric: itl, threshold: 120ms}\n"  # 13
        "          - {metric: tpt}\n"  # 14
        "      - model: other\n"  # 15
        "        availability: {objective: 100}\n"  # 16
        "    training: {ettr: {window: 7x}}\n"  # 17
    )
    assert problems(write(tmp_path, body)) == [
        "14:22: spec.slo.serving[0].latency[2].metric: should be 'ttft', 'itl' or 'e2e' (got 'tpt')",
        "16:35: spec.slo.serving[1].availability.objective: objective 100 is outside (0, 100) %: an SLO of 0 or "
        "100 % has no error budget",
        "17:31: spec.slo.training.ettr.window: should be an SLO window such as 30d, 7d, 12h or 4w (got '7x')",
    ]
    # once the shapes are right, the checks against the rest of the manifest run
    fixed = body.replace("          - {metric: tpt}\n", "").replace("100}", "99}").replace("7x", "7d")
    assert problems(write(tmp_path, fixed)) == [
        "12:28: spec.slo.serving[0].latency[0].threshold: threshold 2s is not a bucket edge of vllm's "
        "vllm:time_to_first_token_seconds (the SLI counts requests under an edge): the nearest edges are 1s and 2500ms",
        "13:27: spec.slo.serving[0].latency[1].threshold: threshold 120ms is not a bucket edge of vllm's "
        "vllm:inter_token_latency_seconds (the SLI counts requests under an edge): the nearest edges are 100ms "
        "and 150ms",
        "14:9: spec.slo.serving[1].model: unknown model 'other': the rollout serves 'tiny-llm'",
    ]


def test_objective_zero_e2e_without_threshold_and_validate_exit(tmp_path: Path) -> None:
    body = (
        "    serving:\n      - model: tiny-llm\n        latency: [{metric: e2e}]\n"
        "        availability: {objective: 0}\n"
    )
    path = write(tmp_path, body)
    result = run("validate", "-f", str(path))
    assert result.code == 3, result.stderr
    assert "12:35: spec.slo.serving[0].availability.objective: objective 0 is outside (0, 100) %" in result.stderr
    assert "Traceback" not in result.stderr
    fixed = path.read_text().replace("objective: 0}", "objective: 99}")
    path.write_text(fixed)
    assert problems(path) == ["11:20: spec.slo.serving[0].latency[0].metric: e2e latency has no MLPerf default: "
                              "set threshold"]  # fmt: skip


def test_training_slos_need_a_train_section(tmp_path: Path) -> None:
    path = write(tmp_path, "    training: {}\n")
    path.write_text(path.read_text().replace("  train: {scheduler: local, command: [python, -c, pass], nodes: 1, "
                                             "gpusPerNode: 0}\n", ""))  # fmt: skip
    assert problems(path) == ["8:5: spec.slo.training: training SLOs need a train section: add spec.train or "
                              "remove slo.training"]  # fmt: skip
