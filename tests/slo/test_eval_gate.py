"""promote --auto re-applies the eval gate to the canary's release before judging it by the SLOs."""

from __future__ import annotations

from pathlib import Path

from tests.gitops.helpers import git
from trainops.registry import media
from trainops_testing.cli import run
from trainops_testing.projects import IMAGE, make_project, slo_overlay
from trainops_testing.services import LOOPBACK


def test_a_release_forced_past_its_gate_is_aborted_before_any_measurement(tmp_path: Path) -> None:
    # Prometheus is nowhere: the gate decides before anything is measured
    project = make_project(tmp_path / "p", slo_overlay(f"http://{LOOPBACK}:1"))
    source = project.root / "sources" / "v4"
    source.mkdir(parents=True)
    (source / "config.json").write_text('{"v": 4}')
    notes = {media.A_RELEASE_FORCED: "true", media.A_RELEASE_REASON: "demo tomorrow", media.A_VERSION: "v4"}
    pushed = run("push", str(source), "tiny-llm/model:v4", "--kind", "model", "-f", str(project.manifest),
                 *[arg for k, v in notes.items() for arg in ("--annotation", f"{k}={v}")])  # fmt: skip
    assert pushed.code == 0, pushed.stderr
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v4"):
        assert run("rollout", *project.cli("start", release, "--image", IMAGE)).code == 0
    outcome = run("rollout", *project.cli("promote", "--auto"))
    assert outcome.code == 8, outcome.stderr
    assert "aborted in commit" in outcome.last_error_line
    assert "release v4 was forced past its gate (demo tomorrow)" in outcome.last_error_line
    body = git("--git-dir", str(project.gitops), "log", "-1", "--format=%B", "main")
    assert "Trainops-Action: abort" in body and "eval gate: release v4 was forced past its gate" in body
    assert "unreachable" not in outcome.stderr
