"""tiny-llm end to end on file://, oci:// and s3://: train, evaluate (gates pass), release
(skopeo sees a ModelPack model artifact), a gate tightened by an environment overlay fails
(exit 8, a failed report pushed, the release refused), a forced release records reason and
who, and `trainops lineage` walks release ← eval ← checkpoint ← parent checkpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.eval.conftest import PYTHON, Project
from trainops.registry import media
from trainops_testing.services import require


def write(project: Project) -> None:
    project.write(
        {
            "image": {"template": "train-pytorch"},
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [PYTHON, "-m", "tiny_llm.train"],
                "env": {"TRAINOPS_MAX_STEPS": "200", "TRAINOPS_CKPT_EVERY": "100"},
                "checkpoint": {"layout": "trainops", "keep": {"last": 5, "best": 1, "metric": "val_loss"}},
            },
            "eval": {
                "command": [PYTHON, "-m", "tiny_llm.eval"],
                "gates": [
                    {"metric": "val_loss", "op": "<=", "value": 3.0},
                    {"metric": "bits_per_char", "op": "<", "value": 4.5},
                ],
                "timeout": "2m",
            },
            "release": {"source": "best", "tag": "v1-step-{step}"},
        },
        environments={"strict": {"eval": {"gates": [{"metric": "val_loss", "op": "<=", "value": 0.5}]}}},
    )


def skopeo_manifest(project: Project, ref: str, tmp_path: Path) -> dict[str, Any]:
    """The release's manifest as skopeo reads it (s3: after `trainops registry copy` to a layout)."""
    require("skopeo", "apt-get install -y skopeo")
    repo_and_tag = ref.split("@")[0]
    if project.scheme == "oci":
        source = "docker://" + repo_and_tag.removeprefix("oci://")
        args = ["--tls-verify=false", source]
    else:
        if project.scheme == "s3":
            layout = tmp_path / "copied"
            copied = project.trainops("registry", "copy", ref, f"file://{layout}:release")
            assert copied.code == 0, copied.stderr
            source = f"oci:{layout}:release"
        else:
            path, _, tag = repo_and_tag.removeprefix("file://").rpartition(":")
            source = f"oci:{path}:{tag}"
        args = [source]
    raw = subprocess.run(["skopeo", "inspect", "--raw", *args], check=True, capture_output=True).stdout
    body: dict[str, Any] = json.loads(raw)
    return body


def test_tiny_llm_is_evaluated_and_released(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project)
    trained = project.trainops("train", "run", "--local", "--run-id", "flow", "--interval", "0.2")
    assert trained.code == 0, trained.stderr[-2000:]

    evaluated = project.trainops("eval", "run", "-o", "json")
    assert evaluated.code == 0, evaluated.stderr[-2000:]
    result = json.loads(evaluated.stdout)
    assert result["passed"] is True and ":step-200@" in result["checkpoint"]
    assert {g["metric"] for g in result["gates"]} == {"val_loss", "bits_per_char"}

    release = project.trainops("release", "create", "-o", "json")
    assert release.code == 0, release.stderr[-2000:]
    made = json.loads(release.stdout)
    assert set(made) >= {"ref", "digest", "checkpoint", "eval", "version"}
    assert made["eval"] == result["report"] and made["checkpoint"] == result["checkpoint"]
    assert made["model"]["format"] == "safetensors" and made["model"]["precision"] == "fp32"
    manifest = skopeo_manifest(project, made["ref"], tmp_path)
    assert manifest["artifactType"] == media.MODEL_ARTIFACT
    assert manifest["config"]["mediaType"] == media.MODEL_CONFIG
    assert {layer["annotations"]["org.cncf.model.filepath"] for layer in manifest["layers"]} == {
        "model.safetensors",
        "trainer_state.json",
    }

    moved = project.trainops("release", "create", "step-100", "--force", "--reason", "x", "--version", made["version"])
    assert moved.code == 5 and "never moved" in moved.last_error_line
    again = json.loads(project.trainops("release", "show", made["ref"].split("@")[0], "-o", "json").stdout)
    assert again["digest"] == made["digest"]

    strict = project.trainops("eval", "run", "--env", "strict", "-o", "json")
    assert strict.code == 8 and "val_loss <= 0.5" in strict.last_error_line
    listed = json.loads(project.trainops("eval", "ls", "-o", "json").stdout)
    assert [e["passed"] for e in listed] == [True, False]
    refused = project.trainops("release", "create", "--env", "strict", "--version", "strict-1")
    assert refused.code == 8 and "val_loss <= 0.5" in refused.last_error_line

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("USER", "oncall")
    forced = project.trainops(
        "release", "create", "--env", "strict", "--version", "strict-1", "--force", "--reason", "canary", "-o", "json"
    )
    assert forced.code == 0, forced.stderr[-2000:]
    assert json.loads(forced.stdout)["forced"] == {"reason": "canary", "by": "oncall"}

    walked = project.trainops("lineage", made["ref"], "--format", "json")
    assert walked.code == 0, walked.stderr
    graph = json.loads(walked.stdout)
    nodes = {n["digest"]: n for n in graph["nodes"]}
    edges = {
        (nodes[e["child"]]["kind"], e["relation"], nodes[e["parent"]]["kind"], nodes[e["parent"]]["step"])
        for e in graph["edges"]
    }
    assert edges == {
        ("model", "released-from", "checkpoint", 200),
        ("model", "evaluated-by", "eval", 200),
        ("eval", "evaluated", "checkpoint", 200),
        ("checkpoint", "parent", "checkpoint", 100),
    }
    assert all(not n["missing"] for n in nodes.values())
