"""One answer per question: `release ls` and `release show` report a release alike and `show`
takes the version `ls` prints; "not found" is exit 4 (`ckpt ls` of a repository nothing was
pushed to, `incidents ls` of a run nobody recorded); `init`'s next steps run as printed, a
reader that leaves early is not an error, and `init` inside a git repository puts its CI
workflow where the CI system reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.checkpoint.test_ckpt_cli import MANIFEST
from tests.cli.test_init_ci import SCHEMAS, _check
from tests.eval.conftest import Project, _own_cache, local_project  # noqa: F401  (fixtures)
from tests.eval.test_release import released, setup
from trainops_testing.cli import run
from trainops_testing.services import git_env


def test_release_ls_and_show_agree_and_show_takes_the_listed_version(local_project: Project) -> None:  # noqa: F811
    setup(local_project)
    assert local_project.trainops("eval", "run", "step-2").code == 0
    made = released(local_project)
    listed = local_project.trainops("release", "ls", "-o", "json")
    assert listed.code == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    shown = local_project.trainops("release", "show", made["ref"], "-o", "json")
    assert shown.code == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["provenance"] and doc["model"], doc  # what release create attached
    assert entry == doc
    by_version = local_project.trainops("release", "show", entry["version"], "-o", "json")
    assert by_version.code == 0, by_version.stderr
    assert json.loads(by_version.stdout) == doc
    text = local_project.trainops("release", "show", entry["version"])
    assert text.code == 0 and text.stdout.splitlines()[0] == doc["ref"]
    missing = local_project.trainops("release", "show", "v9-nothing")
    assert missing.code == 4, missing.stderr


def test_not_found_is_exit_4(tmp_path: Path) -> None:
    (tmp_path / "trainops.yaml").write_text(MANIFEST)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        nothing = run("ckpt", "ls")
        assert nothing.code == 4, (nothing.stdout, nothing.stderr)
        assert f"no repository file://{tmp_path}/.trainops/registry/p/checkpoints" in nothing.last_error_line
        assert run("ckpt", "ls", "-o", "json").code == 4
        unknown = run("incidents", "ls", "no-such-run")
        assert unknown.code == 4, (unknown.stdout, unknown.stderr)
        assert "no run no-such-run is recorded" in unknown.last_error_line
        # a run the registry knows (its timeline: each start the supervisor saw) has no incidents
        from trainops.faults import timeline
        from trainops.faults.incidents import incidents_repository
        from trainops.registry.context import Registries

        with Registries(base_dir=tmp_path) as registries:
            repository = incidents_repository(registries, registry="file://.trainops/registry", pipeline="p")
            timeline.store(registries, repository=repository, timeline=timeline.Timeline(pipeline="p", run_id="r1"))
        known = run("incidents", "ls", "r1")
        assert known.code == 0 and known.stdout.strip() == "no incidents for run r1", known.stderr
        assert run("incidents", "ls").code == 0
    finally:
        os.chdir(cwd)


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in git_env().items() if not k.startswith("TRAINOPS_")}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    env["TRAINOPS_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def test_init_next_steps_run_as_printed(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    made = subprocess.run(
        ["trainops", "init", "my-model"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    [hint] = [line for line in made.stdout.splitlines() if line.startswith("next (in my-model): ")]
    commands = hint.split(": ", 1)[1].split("; ")
    assert commands[-1].startswith("trainops rollout start")
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=tmp_path / "my-model", env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.startswith("start: my-model/model:") or "serves 100%" in done.stdout, done.stdout


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path: Path) -> None:
    """`trainops init | head -1`: stdout's reader is gone before trainops writes; exit 0, no noise."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trainops.cli.main", "init", str(tmp_path / "p")],
            stdout=write,
            stderr=subprocess.PIPE,
            env=_environment(tmp_path),
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "p" / "trainops.yaml").is_file()


def test_init_in_a_subdirectory_puts_the_workflow_at_the_repository_root(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path / "mono")], check=True, env=env)
    for system, path in (("github", ".github/workflows/trainops-llm.yml"), ("gitlab", ".gitlab-ci.yml")):
        project = tmp_path / "mono" / system / "llm"
        made = subprocess.run(
            [sys.executable, "-m", "trainops.cli.main", "init", str(project), "--ci", system],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        workflow = tmp_path / "mono" / path
        assert workflow.is_file() and not (project / ".github").exists() and not (project / ".gitlab-ci.yml").exists()
        assert f"the CI workflow is {workflow}: {system} reads it only at the repository's root" in made.stdout
        assert f"its steps run in {system}/llm" in made.stdout
        checked = _check(workflow, SCHEMAS[system])
        assert checked.returncode == 0, checked.stdout + checked.stderr
        doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        if system == "github":
            job = doc["jobs"]["trainops"]
            assert job["defaults"]["run"]["working-directory"] == "github/llm"
            assert job["steps"][-1]["with"]["path"] == "github/llm/trainops-junit.xml"
        else:
            assert doc["trainops"]["before_script"] == ["cd gitlab/llm"]
            assert doc["trainops"]["artifacts"]["reports"]["junit"] == "gitlab/llm/trainops-junit.xml"
