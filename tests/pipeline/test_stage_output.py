"""A stage that ran produced its output: after a committed change to the trainer, a training
run that resumes at its last step and writes nothing fails the train stage (what happened,
what to do), and no earlier checkpoint becomes the new code's output; `--fresh` trains from
step 0, and what it writes is recorded with the new commit. trainops runs as a process
(the trainer's output goes to its stderr, which CliRunner's streams cannot hand on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.pipeline.flow import Project, make_project
from trainops_testing.cli import Outcome


def _run(project: Project, *args: str) -> Outcome:
    done = project.trainops(*args)
    return Outcome(done.returncode, done.stdout, done.stderr)


def _stages(done: Outcome) -> dict[str, dict[str, Any]]:
    return {stage["name"]: stage for stage in json.loads(done.stdout)["stages"]}


def test_a_training_that_writes_nothing_new_fails_and_fresh_starts_from_step_0(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    first = _run(project, "run", "-o", "json")
    assert first.code == 0, first.stderr[-3000:]
    old = _stages(first)["train"]["outputs"][0]
    config = project.root / "tiny_llm" / "config.py"
    config.write_text(config.read_text(encoding="utf-8").replace("seed: int = 1337", "seed: int = 7"), "utf-8")
    head = project.commit("train with another seed")

    done = _run(project, "run", "-o", "json")
    assert done.code == 9, done.stderr[-3000:]
    train = _stages(done)["train"]
    assert train["status"] == "failed" and train["outputs"] == []
    assert done.stderr.splitlines()[-1].startswith("Error: train.command pushed no new checkpoint (run train-")
    assert "/tiny-llm/checkpoints:step-200 (step 200) and wrote nothing after it" in done.stderr.splitlines()[-1]
    assert done.stderr.splitlines()[-1].endswith("or start fresh from step 0: trainops run --fresh")
    again = _stages(_run(project, "run", "--dry-run", "-o", "json"))
    assert again["train"]["status"] == "runs"  # nothing was recorded for the new code
    assert _run(project, "lineage", "git:HEAD").code == 4  # no checkpoint claims the new commit

    fresh = _run(project, "run", "--fresh", "-o", "json")
    assert fresh.code == 0, fresh.stderr[-3000:]
    trained = _stages(fresh)["train"]
    output = trained["outputs"][0]
    assert trained["status"] == "ran" and output["digest"] != old["digest"]
    assert output["ref"].startswith("tiny-llm/checkpoints:step-200@")
    assert trained["details"]["restored"] is None
    with project.registries() as registries:
        from trainops.registry.store import resolve

        parsed = resolve(registries, ref=registries.ref(output["ref"])).parsed
        assert parsed.lineage().git_commit == head
    walked = _run(project, "lineage", "git:HEAD")
    assert walked.code == 0, walked.stderr
    assert _stages(_run(project, "run", "-o", "json"))["train"]["status"] == "cached"


def test_the_best_checkpoint_is_chosen_among_what_this_flows_training_wrote(tmp_path: Path) -> None:
    import sys

    from tests.pipeline.flow import base_manifest

    doc = base_manifest()
    doc["spec"]["eval"] = {
        "command": [sys.executable, "-m", "tiny_llm.eval"],
        "checkpoint": "best",
        "gates": [{"metric": "val_loss", "op": "<=", "value": 9.0}],
    }
    project = make_project(tmp_path, doc)
    first = _run(project, "run", "--to", "checkpoint", "-o", "json")
    assert first.code == 0, first.stderr[-3000:]
    older = _stages(first)["checkpoint"]["outputs"][0]
    assert older["ref"].startswith("tiny-llm/checkpoints:step-200@")  # 200 steps: the lower val_loss
    # New code, trained fresh for 100 steps: its best is its own, though the older run's is lower.
    doc["spec"]["train"]["env"]["TRAINOPS_MAX_STEPS"] = "100"
    project.write_manifest(doc)
    config = project.root / "tiny_llm" / "config.py"
    config.write_text(config.read_text(encoding="utf-8").replace("seed: int = 1337", "seed: int = 7"), "utf-8")
    project.commit("another seed, fewer steps")
    fresh = _run(project, "run", "--fresh", "--to", "checkpoint", "-o", "json")
    assert fresh.code == 0, fresh.stderr[-3000:]
    stages = _stages(fresh)
    trained = stages["train"]["outputs"][0]
    assert trained["ref"].startswith("tiny-llm/checkpoints:step-100@")
    assert stages["checkpoint"]["outputs"][0]["digest"] == trained["digest"] != older["digest"]


def test_fresh_is_refused_for_a_cluster_job_before_anything_runs(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    done = _run(project, "run", "--fresh", "--executor", "cluster")
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines() == [
        "Error: --fresh starts a training here from step 0; a cluster job resumes as train.checkpoint.resume "
        "says; set train.checkpoint.resume: none (and a checkpoint repository of its own), or run --executor local"
    ]
    assert not (project.root / ".trainops" / "registry").exists()
