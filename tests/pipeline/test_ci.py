"""`trainops ci`: the pushed range from --since, GitHub Actions or GitLab CI; what it affects;
the run of those stages; the Markdown summary and JUnit XML; one-line errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.flow import Project, base_manifest, make_project
from trainops.manifest import load_manifest
from trainops.pipeline.ci import PushRange, classify, push_range

ROLLOUT = {
    "engine": "vllm",
    "traffic": "argo-rollouts",
    "model": "tiny-llm/model:v1",
    "canary": {"steps": [{"weight": 10, "pause": "5m"}, {"weight": 100}]},
}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path)


def _decide(project: Project, before: str) -> Any:
    manifest = load_manifest(project.manifest)
    return classify(manifest=manifest, span=PushRange(before, project.git("rev-parse", "HEAD"), "--since"))


def test_docs_only_runs_nothing_and_says_so(project: Project, tmp_path: Path) -> None:
    before = project.git("rev-parse", "HEAD")
    (project.root / "README.md").write_text("# tiny-llm\n\nHow to train it.\n", encoding="utf-8")
    project.commit("docs")
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    done = project.trainops("ci", "--since", before, "--summary", str(summary), "--junit", str(junit), "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["decision"]["start"] is None
    assert result["decision"]["paths"] == ["README.md"]
    assert "nothing runs" in result["decision"]["reason"]
    assert result["run"] is None
    assert not (project.root / ".trainops").exists()  # nothing ran, nothing was written
    text = summary.read_text(encoding="utf-8")
    assert "No stage runs for this change." in text and "nothing runs" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "0"


def test_code_change_runs_from_the_image_and_reports(project: Project, tmp_path: Path) -> None:
    before = project.git("rev-parse", "HEAD")
    with (project.root / "tiny_llm" / "model.py").open("a", encoding="utf-8") as fh:
        fh.write("\n# tuned\n")
    after = project.commit("code")
    summary, junit, event = tmp_path / "summary.md", tmp_path / "junit.xml", tmp_path / "event.json"
    event.write_text(json.dumps({"before": before, "after": after}), encoding="utf-8")
    done = project.trainops(
        "ci",
        "--junit",
        str(junit),
        "-o",
        "json",
        GITHUB_ACTIONS="true",
        GITHUB_SHA=after,
        GITHUB_EVENT_PATH=str(event),
        GITHUB_STEP_SUMMARY=str(summary),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["range"] == {"before": before, "after": after, "origin": "GitHub Actions"}
    assert result["decision"]["start"] == "image"
    assert result["decision"]["code"] == ["tiny_llm/model.py"]
    stages = {s["name"]: s["status"] for s in result["run"]["stages"]}
    assert stages == {"image": "skipped", "train": "ran", "checkpoint": "ran"}
    text = summary.read_text(encoding="utf-8")
    assert "training code changed (tiny_llm/model.py) → image onwards" in text
    assert "| train | ✅ ran | tiny-llm/checkpoints:step-200@sha256:" in text
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"image", "train", "checkpoint"}
    assert cases["image"].find("skipped") is not None and cases["train"].find("failure") is None


def test_a_failing_stage_fails_the_job_with_its_exit_code(project: Project, tmp_path: Path) -> None:
    before = project.git("rev-parse", "HEAD")
    doc = base_manifest()
    doc["spec"]["train"]["command"] = ["false"]
    project.write_manifest(doc)
    after = project.commit("break training")
    junit = tmp_path / "junit.xml"
    done = project.trainops(
        "ci", "--junit", str(junit), GITLAB_CI="true", CI_COMMIT_BEFORE_SHA=before, CI_COMMIT_SHA=after
    )
    assert done.returncode == 9, done.stderr
    assert done.stderr.splitlines()[-1].startswith("Error: train.command exited 1 (run ")
    assert "trainops.yaml changed (spec.train) → train onwards" in done.stdout
    failure = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "train").find("failure")
    assert failure is not None and "train.command exited 1 (run " in (failure.get("message") or "")


def test_only_the_rollout_section_affects_only_rollout(project: Project) -> None:
    doc = base_manifest()
    doc["spec"]["rollout"] = ROLLOUT
    project.write_manifest(doc)
    before = project.commit("serve it")
    doc["spec"]["rollout"]["replicas"] = 4
    project.write_manifest(doc)
    project.commit("more replicas")
    decision = _decide(project, before)
    assert decision.start == "rollout"
    assert decision.sections == ["spec.rollout"]
    assert decision.reason == "trainops.yaml changed (spec.rollout) → rollout onwards"

    doc["environments"] = {"dev": {"train": {"env": {"TRAINOPS_MAX_STEPS": "300"}}}}
    project.write_manifest(doc)
    project.commit("dev trains longer")
    manifest = load_manifest(project.manifest, env="dev")
    span = PushRange(before, project.git("rev-parse", "HEAD"), "--since")
    assert classify(manifest=manifest, span=span).start == "train"


def test_a_new_branch_runs_every_stage(project: Project) -> None:
    decision = classify(
        manifest=load_manifest(project.manifest), span=PushRange(None, project.git("rev-parse", "HEAD"), "GitLab CI")
    )
    assert decision.start == "image"
    assert "every stage" in decision.reason


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (("--since", "0123456789abcdef"), {}, 3, "Error: CI range: git does not know --since '0123456789abcdef'"),
        ((), {}, 2, "Error: no pushed range: pass --since REV, or run under GitHub Actions or GitLab CI"),
        (
            (),
            {"GITLAB_CI": "true", "CI_COMMIT_BEFORE_SHA": "f" * 40, "CI_COMMIT_SHA": "HEAD"},
            3,
            "Error: CI range: git does not know the commit before the push 'ffffffff",
        ),
    ],
)
def test_a_range_git_does_not_know_is_one_line(
    project: Project, args: tuple[str, ...], env: dict[str, str], code: int, message: str
) -> None:
    done = project.trainops("ci", *args, **env)
    assert done.returncode == code
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr
    assert not (project.root / ".trainops").exists()


@pytest.mark.parametrize("null", ["0" * 40, "0" * 64])
def test_git_null_revisions_mean_a_new_or_a_deleted_branch(project: Project, tmp_path: Path, null: str) -> None:
    head = project.git("rev-parse", "HEAD")
    assert push_range(root=project.root, since=null, environ={}) == PushRange(None, head, "--since")
    assert push_range(root=project.root, since=head, until=null, environ={}) == PushRange(head, None, "--since")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"before": head, "after": null, "deleted": True}), encoding="utf-8")
    github = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": head, "GITHUB_EVENT_PATH": str(event)}
    assert push_range(root=project.root, since=None, environ=github) == PushRange(head, None, "GitHub Actions")
    deleted = classify(manifest=load_manifest(project.manifest), span=PushRange(head, None, "--since"))
    assert deleted.start is None
    assert deleted.reason == f"the branch was deleted (it was at {head[:12]}): nothing runs"


def test_a_revision_that_looks_like_an_option_is_refused(project: Project) -> None:
    done = project.trainops("ci", "--since=--output=/tmp/x")
    assert done.returncode == 3
    assert done.stderr.startswith("Error: CI range: --since '--output=/tmp/x' is not a revision")
