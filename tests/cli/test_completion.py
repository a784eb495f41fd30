"""Shell completion completes what kubectl would: environments, references (a registry's
repositories, then a repository's tags), run ids and incident ids, from the manifest and
the records the registry keeps; driven as bash drives it (click's completion variables)."""

from __future__ import annotations

from pathlib import Path

from trainops.faults import timeline
from trainops.faults.incidents import Incident, incidents_repository, save
from trainops.registry.context import Registries
from trainops_testing.cli import run, run_subprocess

MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: lr}
spec:
  registry: file://.trainops/registry
  train:
    scheduler: local
    command: [python3, -c, pass]
environments:
  dev: {}
  prod: {}
  dev-strict: {}
"""


def _complete(root: Path, line: str) -> list[str]:
    words = line.split(" ")
    env = {"_TRAINOPS_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    out = run_subprocess([], env=env, cwd=root)
    assert out.code == 0, out.stderr
    return [item.split(",", 1)[1] for item in out.stdout.splitlines() if item]


def test_completion_offers_environments_references_runs_and_incidents(tmp_path: Path) -> None:
    (tmp_path / "trainops.yaml").write_text(MANIFEST)
    (tmp_path / "w.txt").write_text("w")
    for ref in ("lr/checkpoints:step-10", "lr/checkpoints:step-20", "lr/model:v1"):
        assert run("push", str(tmp_path / "w.txt"), ref, "-f", str(tmp_path / "trainops.yaml")).code == 0
    at = "2026-12-05T00:00:00.000Z"
    with Registries(default_registry="file://.trainops/registry", base_dir=tmp_path) as registries:
        repository = incidents_repository(registries, registry="file://.trainops/registry", pipeline="lr")
        start = timeline.Segment(started=at)
        line = timeline.Timeline(pipeline="lr", run_id="run-a", segments=[start])
        timeline.store(registries, repository=repository, timeline=line)
        incident = Incident(
            id="run-b.1", pipeline="lr", run_id="run-b", fault="hang", detail="no progress", source="progress",
            evidence=["-"], action="restart", action_note="restarted", evidence_at=at, detected=at,
        )  # fmt: skip
        save(registries, repository=repository, incident=incident)

    assert _complete(tmp_path, "trainops train status --env d") == ["dev", "dev-strict"]
    assert _complete(tmp_path, "trainops registry show lr/") == ["lr/checkpoints:", "lr/model:"]  # no lr/incidents
    tags = _complete(tmp_path, "trainops registry show lr/checkpoints:step")
    assert tags == ["lr/checkpoints:step-10", "lr/checkpoints:step-20"]
    assert _complete(tmp_path, "trainops train status run-") == ["run-a", "run-b"]
    assert _complete(tmp_path, "trainops incidents show ") == ["run-b.1"]
    assert _complete(tmp_path, "trainops drill hang r") == ["run-a", "run-b"]
    (tmp_path / "trainops.yaml").write_text("not: [valid")  # a broken manifest offers nothing, quietly
    assert _complete(tmp_path, "trainops train status r") == []
