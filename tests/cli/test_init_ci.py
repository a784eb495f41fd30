"""`trainops init --ci github|gitlab`: the workflows run `trainops ci`, and they are valid
against SchemaStore's GitHub workflow and GitLab CI schemas (as check-jsonschema vendors them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainops_testing.cli import run

SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}
FILES = {"github": ".github/workflows/trainops.yml", "gitlab": ".gitlab-ci.yml"}


def _check(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("system", ["github", "gitlab"])
def test_init_writes_a_valid_workflow_that_runs_trainops_ci(tmp_path: Path, system: str) -> None:
    result = run("init", str(tmp_path), "--ci", system, "-o", "json")
    assert result.code == 0, result.stderr
    path = tmp_path / FILES[system]
    other = tmp_path / FILES["gitlab" if system == "github" else "github"]
    assert path.is_file() and not other.exists()
    checked = _check(path, SCHEMAS[system])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = path.read_text(encoding="utf-8")
    assert "trainops ci " in text and "trainops validate --render" in text
    doc = yaml.safe_load(text)
    if system == "github":
        steps = doc["jobs"]["trainops"]["steps"]
        assert steps[0]["with"]["fetch-depth"] == 0
        ci = next(s for s in steps if "trainops ci" in str(s.get("run")))
        assert ci["env"]["GITHUB_EVENT_BEFORE"] == "${{ github.event.before }}"
    else:
        assert doc["trainops"]["variables"]["GIT_DEPTH"] == "0"
        assert doc["trainops"]["artifacts"]["reports"]["junit"] == "trainops-junit.xml"


def test_the_schemas_catch_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: a job without runs-on, a GitLab job with an unknown key."""
    github = tmp_path / "broken.yml"
    github.write_text("on: push\njobs:\n  x:\n    steps: [{run: 'true'}]\n", encoding="utf-8")
    assert _check(github, SCHEMAS["github"]).returncode == 1
    gitlab = tmp_path / ".gitlab-ci.yml"
    gitlab.write_text("job:\n  script: ['true']\n  scritp: oops\n", encoding="utf-8")
    assert _check(gitlab, SCHEMAS["gitlab"]).returncode == 1


def test_init_ci_none_writes_no_workflow(tmp_path: Path) -> None:
    assert run("init", str(tmp_path), "--ci", "none").code == 0
    assert not (tmp_path / ".github").exists() and not (tmp_path / ".gitlab-ci.yml").exists()
    assert (tmp_path / "trainops.yaml").is_file()
