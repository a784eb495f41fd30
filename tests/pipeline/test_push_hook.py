"""A real `git push` starts the flow: the bare repository's post-receive hook stands in for a
CI runner and runs `trainops ci` on what was pushed (GitLab CI's variables: the pushed range).

The first push (a new branch) runs every stage; the registry then holds the checkpoints and
the stage records. A second push that touches only docs runs nothing, and says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.pipeline.flow import REPO, base_manifest, make_project
from trainops.registry.context import Registries
from trainops.registry.listing import list_repository
from trainops_testing.services import bare_git_repo, require

HOOK = """#!/bin/sh
# post-receive: check out what was pushed into the runner's workspace, then `trainops ci`.
unset GIT_DIR GIT_WORK_TREE GIT_QUARANTINE_PATH
while read old new ref; do
  [ "$ref" = refs/heads/main ] || continue
  [ -d "{work}/.git" ] || git clone -q "{origin}" "{work}"
  git -C "{work}" fetch -q origin && git -C "{work}" checkout -q -f "$new" || exit 1
  cd "{work}" && GITLAB_CI=true CI_COMMIT_BEFORE_SHA="$old" CI_COMMIT_SHA="$new" \\
    PYTHONPATH="{pythonpath}" "{python}" -m trainops.cli.main ci -o json \\
    --summary "{runs}/summary-$new.md" --junit "{runs}/junit-$new.xml" > "{runs}/result-$new.json"
  echo "trainops ci exited $?"
done
"""


def _tags(registries: Registries, repository: str) -> list[str]:
    return [t.tag for t in list_repository(registries, ref=registries.ref(repository)).tags]


def test_a_push_runs_the_flow_and_a_docs_push_runs_nothing(tmp_path: Path) -> None:
    git = require("git", "apt-get install -y git")
    registry = tmp_path / "registry"
    doc = base_manifest()
    doc["spec"]["registry"] = f"file://{registry}"  # the team's registry, not the runner's workspace
    project = make_project(tmp_path, doc)
    origin = bare_git_repo(tmp_path / "origin.git")
    runs = tmp_path / "runs"
    runs.mkdir()
    hook = origin / "hooks" / "post-receive"
    hook.write_text(
        HOOK.format(work=tmp_path / "runner", origin=origin, runs=runs, python=sys.executable, pythonpath=REPO),
        encoding="utf-8",
    )
    hook.chmod(0o755)
    project.git("remote", "add", "origin", str(origin))

    def push() -> tuple[str, dict[str, object]]:
        done = subprocess.run(
            [git, "push", "-q", "origin", "main"], cwd=project.root, env=project.env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "trainops ci exited 0" in done.stderr, done.stderr[-3000:]
        head = project.git("rev-parse", "HEAD")
        return head, json.loads((runs / f"result-{head}.json").read_text(encoding="utf-8"))

    first, result = push()
    assert result["range"] == {"before": None, "after": first, "origin": "GitLab CI"}  # type: ignore[comparison-overlap]
    stages = {s["name"]: s for s in result["run"]["stages"]}  # type: ignore[index]
    assert stages["train"]["status"] == "ran" and stages["checkpoint"]["status"] == "ran"
    with Registries(default_registry=f"file://{registry}", base_dir=tmp_path) as regs:
        checkpoints = _tags(regs, "tiny-llm/checkpoints")
        records = _tags(regs, "tiny-llm/stages")
    assert "step-200" in checkpoints
    assert f"train-{stages['train']['key'].split(':')[1]}" in records
    summary = (runs / f"summary-{first}.md").read_text(encoding="utf-8")
    assert "every stage" in summary and "| train | ✅ ran |" in summary

    (project.root / "README.md").write_text("# tiny-llm\n\nNow with docs.\n", encoding="utf-8")
    second = project.commit("docs only")
    head, result = push()
    assert head == second
    assert result["run"] is None
    assert result["decision"]["start"] is None  # type: ignore[index]
    assert "nothing runs" in result["decision"]["reason"]  # type: ignore[index]
    with Registries(default_registry=f"file://{registry}", base_dir=tmp_path) as regs:
        assert _tags(regs, "tiny-llm/stages") == records  # no stage ran
        assert _tags(regs, "tiny-llm/checkpoints") == checkpoints
    assert "No stage runs for this change." in (runs / f"summary-{second}.md").read_text(encoding="utf-8")
    assert os.path.exists(runs / f"junit-{second}.xml")
