"""`trainops ci` on git's own terms, with the project `trainops init` scaffolds, unedited.

A real bare repository's post-receive hook stands in for the CI server: for each pushed ref
it reads `oldrev newrev refname` from stdin, checks out newrev in the runner's workspace and
runs `trainops ci --since "$oldrev" --until "$newrev"` — git's values as they are, the
all-zero revision included (a new branch, a deleted branch). The hook leaves GIT_DIR set for
trainops, as hooks do, so trainops must find the workspace's repository itself.

Pushed in turn: the first push of main (every stage runs), a docs-only change (nothing
runs), a code change while the trainer's machine fails (train fails: exit 9), a change of
the rollout section only (the stages without output before it run first, as `dvc repro`),
a new branch at the same commit (every stage, all cached), and that branch's deletion
(nothing runs, and it says so).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainops_testing.cli import run
from trainops_testing.services import bare_git_repo, require

NULL = "0" * 40
HOOK = """#!/bin/sh
# post-receive: for each pushed ref, check out what was pushed into the runner's workspace
# (git's own calls without the hook's GIT_DIR), then `trainops ci` on git's values.
while read old new ref; do
  if [ "$new" != {null} ]; then
    env -u GIT_DIR git -C "{work}" fetch -q origin "+refs/heads/*:refs/remotes/origin/*" || exit 1
    env -u GIT_DIR git -C "{work}" checkout -q -f "$new" || exit 1
  fi
  name=$(basename "$ref")
  cd "{work}" && "{python}" -m trainops.cli.main ci --env dev --since "$old" --until "$new" -o json \\
      > "{runs}/$name-$new.json" 2> "{runs}/$name-$new.err"
  echo "ci $ref exit $?" >> "{runs}/log"
done
"""


class Repo:
    def __init__(self, root: Path, git: str, env: dict[str, str]) -> None:
        self.root, self.git_bin, self.env = root, git, env

    def git(self, *args: str) -> str:
        done = subprocess.run(
            [self.git_bin, *args], cwd=self.root, env=self.env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def pushed(tmp_path: Path) -> tuple[Repo, Path, Any]:
    """The scaffolded project, its bare origin with the hook, and push(refspec) → results."""
    git = require("git", "apt-get install -y git")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Dev\n\temail = dev@example.com\n", encoding="utf-8")
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    project = tmp_path / "my-model"
    outcome = run("init", str(project), env={"HOME": str(home)})
    assert outcome.code == 0, outcome.stderr
    repo = Repo(project, git, env)
    repo.git("branch", "-M", "main")
    origin = bare_git_repo(tmp_path / "origin.git")
    runs, work = tmp_path / "runs", tmp_path / "runner"
    runs.mkdir()
    subprocess.run([git, "clone", "-q", str(origin), str(work)], env=env, check=True, capture_output=True)
    hook = origin / "hooks" / "post-receive"
    hook.write_text(HOOK.format(null=NULL, work=work, runs=runs, python=sys.executable), encoding="utf-8")
    hook.chmod(0o755)
    repo.git("remote", "add", "origin", str(origin))

    def push(*refspec: str, **extra: str) -> list[tuple[str, int, dict[str, Any], str]]:
        """(ref, exit code, `ci -o json`, stderr) of each ref the hook ran ci for."""
        log = runs / "log"
        seen = log.read_text().splitlines() if log.exists() else []
        done = subprocess.run(
            [git, "push", "-q", "origin", *refspec], cwd=project, env={**env, **extra}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        out = []
        for line in log.read_text().splitlines()[len(seen) :]:
            _, ref, _, code = line.split()
            found = sorted(runs.glob(f"{Path(ref).name}-*.json"), key=lambda p: p.stat().st_mtime)[-1]
            err = found.with_suffix(".err").read_text(encoding="utf-8")
            out.append((ref, int(code), json.loads(found.read_text(encoding="utf-8")), err))
        return out

    return repo, work, push


def _stages(result: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in result["run"]["stages"]} if result["run"] else {}


def test_ci_from_a_post_receive_hook_on_gits_terms(pushed: tuple[Repo, Path, Any]) -> None:
    repo, work, push = pushed
    # 1. The first push of main: the old value is all zeros, so every stage runs.
    [(ref, code, result, err)] = push("main")
    assert (ref, code) == ("refs/heads/main", 0), err
    assert result["range"]["before"] is None
    assert "starts a branch: every stage" in result["decision"]["reason"]
    assert _stages(result) == {
        "image": "skipped",
        "train": "ran",
        "checkpoint": "ran",
        "eval": "ran",
        "release": "ran",
        "rollout": "ran",
    }
    # 2. Docs only: nothing runs (the scaffold's .dockerignore keeps *.md out of the code).
    (repo.root / "README.md").write_text("# my-model\n\nHow to train it.\n", encoding="utf-8")
    (repo.root / "docs").mkdir()
    (repo.root / "docs" / "design.md").write_text("# Design\n", encoding="utf-8")
    repo.commit("docs")
    [(_, code, result, err)] = push("main")
    assert code == 0, err
    assert result["run"] is None and result["decision"]["start"] is None
    assert "nothing runs" in result["decision"]["reason"]
    # 3. A code change while the machine the trainer runs on fails: train fails, exit 9.
    trainer = repo.root / "my_model" / "train.py"
    text = trainer.read_text(encoding="utf-8")
    assert 'os.environ.get("TRAIN_STEPS", "30")' in text
    text = text.replace('os.environ.get("TRAIN_STEPS", "30")', 'os.environ.get("TRAIN_STEPS", "40")')
    text = text.replace(
        "def main() -> None:\n",
        'def main() -> None:\n    if os.environ.get("OUTAGE"):\n        raise SystemExit("the node failed")\n',
    )
    trainer.write_text(text, encoding="utf-8")
    repo.commit("train 40 steps")
    [(_, code, result, err)] = push("main", OUTAGE="1")
    assert code == 9, err
    assert result["decision"]["start"] == "image"
    assert _stages(result)["train"] == "failed"
    # 4. Only the rollout section changes; the train stage before it has no output for its
    # inputs (the failed run): ci runs from train, as `dvc repro` would, not a --from error.
    manifest = repo.root / "trainops.yaml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("replicas: 1", "replicas: 2"), encoding="utf-8")
    repo.commit("two replicas")
    dry = subprocess.run(
        [sys.executable, "-m", "trainops.cli.main", "ci", "--env", "dev", "--since", "HEAD~1", "--dry-run"],
        cwd=repo.root,
        env=repo.env,
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stderr
    assert "affected: trainops.yaml changed (spec.rollout) → rollout onwards" in dry.stdout
    assert "no output for its inputs before rollout" in dry.stdout  # why train would run
    assert not (repo.root / ".trainops").exists()  # a dry run wrote nothing
    [(_, code, result, err)] = push("main")
    assert code == 0, err
    assert result["decision"]["start"] == "rollout"
    stages = _stages(result)
    assert (stages["train"], stages["eval"], stages["release"], stages["rollout"]) == ("ran",) * 4
    assert "--from" not in err
    # 5. A new branch at the same commit: every stage is considered; all are cached now.
    [(ref, code, result, err)] = push("main:refs/heads/feature")
    assert (ref, code) == ("refs/heads/feature", 0), err
    assert result["range"]["before"] is None
    assert set(_stages(result).values()) <= {"cached", "skipped"}
    # 6. The branch deleted: the new value is all zeros; nothing runs, and it says so.
    [(ref, code, result, err)] = push(":refs/heads/feature")
    assert (ref, code) == ("refs/heads/feature", 0), err
    assert result["range"]["after"] is None and result["run"] is None
    assert result["decision"]["reason"].startswith("the branch was deleted")
    assert "nothing runs" in result["decision"]["reason"]
    assert work.exists()
