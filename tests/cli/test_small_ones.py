"""The small ones: bookkeeping repositories hidden from `registry ls` unless --all; a
provenance of a repository without a remote names its commit, not `git+unknown`; `registry
show` says which referrer is the provenance and which the signature."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from tests.eval.conftest import Project, _own_cache, local_project  # noqa: F401  (fixtures)
from tests.eval.test_release import released, setup
from tests.signing.conftest import ec_key
from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.templating import render_template
from trainops_testing.cli import run
from trainops_testing.services import git_env


def test_bookkeeping_repositories_are_listed_with_all(tmp_path: Path) -> None:
    registry = f"file://{tmp_path}/reg"
    src = tmp_path / "src"
    src.mkdir()
    (src / "r.json").write_text("{}")
    for repo in ("p/checkpoints", "p/incidents", "p/stages", "p/model"):
        assert run("push", str(src), f"{registry}/{repo}:v1").code == 0
    listed = run("registry", "ls", registry)
    assert listed.code == 0, listed.stderr
    assert listed.stdout.split() == [f"{registry}/p/checkpoints", f"{registry}/p/model"]
    assert "(and 2 record repositories: --all lists them)" in listed.stderr
    every = run("registry", "ls", registry, "--all")
    assert every.stdout.split() == [f"{registry}/p/{r}" for r in ("checkpoints", "incidents", "model", "stages")]
    assert json.loads(run("registry", "ls", registry, "-o", "json").stdout)["bookkeeping"] == 2


def test_provenance_without_a_remote_and_the_referrers_it_is_among(local_project: Project) -> None:  # noqa: F811
    keys = local_project.root / "keys"
    keys.mkdir()
    ec_key(keys)
    setup(local_project, release={"signing": {"key": "keys/release.pem", "publicKey": "keys/release.pub"}}, steps=())
    environ = git_env()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "p"]):
        subprocess.run(["git", "-C", str(local_project.root), *args], check=True, env=environ, capture_output=True)
    head = subprocess.run(
        ["git", "-C", str(local_project.root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    src = local_project.root / "made" / "step-2"
    src.mkdir(parents=True)
    save_file({"w": np.ones((4, 4), dtype=np.float32)}, str(src / "model.safetensors"))
    with local_project.registries() as regs:  # trained at a commit of a repository with no remote
        lineage = Lineage(pipeline="tiny-llm", step=2, run_id="r1", metrics={"loss": 1.0}, git_commit=head)
        store.push(regs, source=src, ref=regs.ref("tiny-llm/checkpoints:step-2"), kind="checkpoint", lineage=lineage)
    assert local_project.trainops("eval", "run", "step-2").code == 0
    made = released(local_project)
    verified = local_project.trainops("release", "verify", made["ref"], "--wide")
    assert verified.code == 0, verified.stderr
    assert "unknown" not in verified.stdout, verified.stdout
    assert f"    source:      gitCommit {head}" in verified.stdout.splitlines(), verified.stdout
    shown = local_project.trainops("registry", "show", made["ref"])
    assert shown.code == 0, shown.stderr
    doc = json.loads(local_project.trainops("registry", "show", made["ref"], "-o", "json").stdout)
    assert sorted(r["record"] for r in doc["referrers"]) == ["provenance", "signature"]
    referrers = shown.stdout.split("  referrers:\n", 1)[1].splitlines()[: len(doc["referrers"])]
    assert sorted(line.split()[0] for line in referrers) == ["provenance", "signature"], shown.stdout


LINEAGE_MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: p}
spec:
  registry: file://.trainops/registry
  image: {template: train-pytorch, context: .}
  train:
    scheduler: local
    command: [python3, train.py]
"""


def test_lineage_of_a_commit_that_changed_nothing_tracked_walks_from_its_content(tmp_path: Path) -> None:
    """A docs-only commit after the training one: `lineage git:HEAD` walks from the commit
    whose content HEAD is, and says so; after a change to the code it is not found (exit 4)."""
    environ = git_env()

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], check=True, env=environ, capture_output=True)
        return done.stdout.decode().strip()

    (tmp_path / "trainops.yaml").write_text(LINEAGE_MANIFEST)
    (tmp_path / "train.py").write_text("print('train')\n")
    (tmp_path / ".gitignore").write_text(".trainops/\n")
    (tmp_path / ".dockerignore").write_text(render_template("project/dockerignore.j2"))  # as init writes it
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "train")
    trained = git("rev-parse", "HEAD")
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "w.bin").write_bytes(b"w")
    with Registries(default_registry="file://.trainops/registry", base_dir=tmp_path) as regs:
        lineage = Lineage(pipeline="p", step=1, git_commit=trained)
        store.push(regs, source=src, ref=regs.ref("p/checkpoints:step-1"), kind="checkpoint", lineage=lineage)
    (tmp_path / "README.md").write_text("# p\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "docs")
    docs = git("rev-parse", "HEAD")
    manifest = str(tmp_path / "trainops.yaml")
    walked = run("lineage", "git:HEAD", "-f", manifest, "-o", "json")
    assert walked.code == 0, walked.stderr
    graph = json.loads(walked.stdout)
    assert graph["root"] == f"git:{trained}" and any(n["kind"] == "checkpoint" for n in graph["nodes"])
    said = f"{docs[:12]} changed nothing trainops tracks since {trained[:12]}, whose content it is"
    assert said in graph["note"] and said in walked.stderr
    (tmp_path / "train.py").write_text("print('train more')\n")
    git("commit", "-q", "-am", "code")
    changed = run("lineage", "git:HEAD", "-f", manifest)
    assert changed.code == 4 and "records git commit" in changed.last_error_line, changed.stderr
