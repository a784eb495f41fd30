"""`trainops lineage git:REV`: from a git commit of the training code down to the rollout
commits that served what it trained. A real flow in a real git repo: tiny-llm trained
locally (checkpoints record the commit, some pruned), evaluated, released, rolled out to a
real bare GitOps repo; then the walk in every format, and bad revisions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops.registry import media, store
from trainops.registry.context import Registries
from trainops.registry.lineage import DownIndex
from trainops.registry.lineage_data import Lineage
from trainops_testing.cli import Outcome, run
from trainops_testing.projects import IMAGE
from trainops_testing.services import bare_git_repo, git_env

PYTHON = sys.executable
SERVE = "clusters/dev-serve"
SPEC: dict[str, Any] = {
    "registry": "file://.trainops/registry",
    "gitops": {"repo": "file://gitops.git", "branch": "main", "path": "clusters/dev"},
    "image": {"template": "train-pytorch"},  # never built: the local run records its environment
    "train": {
        "scheduler": "local",
        "gpusPerNode": 0,
        "command": [PYTHON, "-m", "tiny_llm.train"],
        "env": {"TRAINOPS_MAX_STEPS": "30", "TRAINOPS_CKPT_EVERY": "10"},
        "checkpoint": {"layout": "trainops", "keep": {"last": 1, "best": 1, "metric": "val_loss"}},
    },
    "eval": {
        "command": [PYTHON, "-m", "tiny_llm.eval"],
        "gates": [{"metric": "val_loss", "op": "<=", "value": 100.0}],
        "timeout": "2m",
    },
    "release": {"source": "latest", "tag": "v1-step-{step}"},
    "rollout": {"engine": "vllm", "traffic": "argo-rollouts", "canary": {"steps": [{"weight": 10}, {"weight": 100}]}},
}


@dataclass(frozen=True)
class Flow:
    root: Path
    sha: str  # the commit the checkpoints were trained from
    release: dict[str, Any]
    rollout: dict[str, Any]

    def trainops(self, *args: str, env: dict[str, str | None] | None = None) -> Outcome:
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            return run(*args, "-f", str(self.root / "trainops.yaml"), env=env)
        finally:
            os.chdir(cwd)

    def graph(self, *args: str) -> dict[str, Any]:
        outcome = self.trainops("lineage", *args, "--format", "json")
        assert outcome.code == 0, outcome.stderr
        data: dict[str, Any] = json.loads(outcome.stdout)
        return data


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=git_env())
    return done.stdout.strip()


def ok(flow: Flow, *args: str) -> dict[str, Any]:
    outcome = flow.trainops(*args, "-o", "json")
    assert outcome.code == 0, outcome.stderr[-2000:]
    data: dict[str, Any] = json.loads(outcome.stdout)
    return data


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    root = tmp_path_factory.mktemp("commit-lineage")
    doc = {"apiVersion": "trainops.dev/v1alpha1", "kind": "Pipeline", "metadata": {"name": "tiny-llm"}, "spec": SPEC}
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (root / ".gitignore").write_text(".trainops/\ngitops.git/\ncheckpoints/\n", encoding="utf-8")
    git(root, "init", "--quiet", "-b", "work")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "train")
    bare_git_repo(root / "gitops.git")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in git_env({}).items():
            patch.setenv(name, value)
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("TRAINOPS_CACHE_DIR", str(root / "cache"))
        for name in [n for n in os.environ if n.startswith(("TRAINOPS_", "TINY_LLM_")) and n != "TRAINOPS_CACHE_DIR"]:
            patch.delenv(name)
        made = Flow(root, git(root, "rev-parse", "HEAD"), {}, {})
        trained = made.trainops("train", "run", "--local", "--run-id", "lin", "--interval", "0.2")
        assert trained.code == 0, trained.stderr[-2000:]
        ok(made, "eval", "run")
        release = ok(made, "release", "create")
        started = ok(made, "rollout", "start", release["ref"], "--image", IMAGE)
        yield Flow(root, made.sha, release, started)


def by_kind(graph: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for node in graph["nodes"]:
        out.setdefault(node["kind"], []).append(node)
    return out


def test_json_walks_commit_to_checkpoints_eval_release_and_rollout(flow: Flow) -> None:
    graph = flow.graph(f"git:{flow.sha}")
    assert graph["root"] == f"git:{flow.sha}" and graph["direction"] == "down"
    kinds = by_kind(graph)
    assert [n["gitCommit"] for n in kinds["commit"]] == [flow.sha]
    steps = sorted(n["step"] for n in kinds["checkpoint"])
    assert steps == [10, 20, 30]
    assert sorted(n["step"] for n in kinds["checkpoint"] if n["pruned"]) == [10, 20]  # keep last 1, best 1
    assert [n["digest"] for n in kinds["model"]] == [flow.release["digest"]]
    assert len(kinds["eval"]) == 1
    assert [n["gitCommit"] for n in kinds["rollout"]] == [flow.rollout["commit"]]
    nodes = {n["digest"]: n for n in graph["nodes"]}
    edges = {(nodes[e["child"]]["kind"], e["relation"], nodes[e["parent"]]["kind"]) for e in graph["edges"]}
    assert ("checkpoint", "built-from", "commit") in edges
    assert ("eval", "evaluated", "checkpoint") in edges
    assert ("model", "released-from", "checkpoint") in edges
    assert ("model", "evaluated-by", "eval") in edges
    assert ("rollout", "start stable", "model") in edges
    # all three record the commit, but only the first hangs from it: the later ones from their parent
    linked = [nodes[e["child"]]["step"] for e in graph["edges"] if e["parent"] == graph["root"]]
    assert linked == [10]


def test_abbreviated_sha_head_and_dash_o_json_name_the_same_graph(flow: Flow) -> None:
    full = flow.graph(f"git:{flow.sha}")
    assert flow.graph(f"git:{flow.sha[:8]}") == full
    assert flow.graph("git:HEAD") == full
    assert flow.graph("git:work") == full
    assert flow.graph(f"git:{flow.sha}", "--scan", "file://.trainops/registry") == full
    elsewhere = flow.trainops("lineage", f"git:{flow.sha}", "--registry", f"file://{flow.root / 'empty'}")
    assert elsewhere.code == 4 and "no artifact in file://" in elsewhere.last_error_line
    outcome = flow.trainops("lineage", f"git:{flow.sha}", "-o", "json")
    assert outcome.code == 0 and json.loads(outcome.stdout) == full


def test_tree_mermaid_and_dot_show_the_commit_and_the_rollout(flow: Flow) -> None:
    sha12, commit12 = flow.sha[:12], str(flow.rollout["commit"])[:12]
    tree = flow.trainops("lineage", f"git:{flow.sha}", env={"COLUMNS": "400"})  # a line a node, not folded
    assert tree.code == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0].startswith("commit ") and lines[0].endswith(f"[{sha12}]")
    assert any("built: checkpoint " in line and "step 10" in line for line in lines)
    assert any("(pruned)" in line for line in lines)
    assert any(f"start stable: rollout {SERVE}@{commit12}" in line for line in lines)
    mermaid = flow.trainops("lineage", f"git:{flow.sha}", "--format", "mermaid").stdout
    assert f'g{sha12}["commit ' in mermaid and f"-->|start stable| n{flow.release['digest'][7:19]}" in mermaid
    assert f"-->|built-from| g{sha12}" in mermaid
    dot = flow.trainops("lineage", f"git:{flow.sha}", "--format", "dot").stdout
    assert f'"git:{flow.sha}" [label="commit ' in dot and f'-> "git:{flow.sha}" [label="built-from"]' in dot
    assert f'"commit:{flow.rollout["commit"]}" -> "{flow.release["digest"]}" [label="start stable"]' in dot


def test_a_commit_nothing_came_from_and_bad_revisions_are_one_line_errors(flow: Flow) -> None:
    git(flow.root, "commit", "--quiet", "--allow-empty", "-m", "later")
    try:
        later = flow.trainops("lineage", "git:HEAD")  # it changed nothing tracked: walked from its content's commit
        assert later.code == 0 and "changed nothing trainops tracks since" in later.stderr, later.stderr
        cases = {
            "git:no-such-branch": (4, "git revision no-such-branch is unknown"),
            f"git:{'0' * 40}": (4, f"records git commit {'0' * 12}"),
            "git:--output=x": (3, "is not a git revision"),
            "git:a..b": (3, "is not a git revision"),
            "git:": (3, "is not a git revision"),
        }
        for rev, (code, text) in cases.items():
            outcome = flow.trainops("lineage", rev)
            assert outcome.code == code, (rev, outcome.stderr)
            assert text in outcome.stderr and len(outcome.stderr.strip().splitlines()) <= 2, outcome.stderr
            assert outcome.stderr.startswith("Error: ") and not outcome.stdout
    finally:
        git(flow.root, "reset", "--quiet", "--hard", "HEAD~1")


def push_image(regs: Registries, commit: str) -> str:
    """An OCI image (no layers) whose config labels carry only its revision, as a builder
    other than trainops writes it; its digest."""
    from trainops.registry.artifact import canonical_json
    from trainops.registry.backends.base import ManifestData, sha256_digest
    from trainops.registry.store import bytes_source

    labels = {media.A_REVISION: commit}
    config = canonical_json({"architecture": "amd64", "os": "linux", "config": {"Labels": labels}})
    blob = bytes_source(config)
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": {"mediaType": media.IMAGE_CONFIGS[0], "digest": blob.digest, "size": blob.size},
        "layers": [],
    }
    manifest = canonical_json(body)
    repo = regs.ref("x/image")
    backend = regs.backend(repo)
    backend.upload_blob(repo.repository, blob)
    backend.put_manifest(repo.repository, ManifestData(manifest, media.OCI_MANIFEST, sha256_digest(manifest)), tag="1")
    return sha256_digest(manifest)


def test_an_image_recording_the_commit_comes_first(tmp_path: Path) -> None:
    """commit → image (its revision label) → the checkpoint trained in it, which records the
    commit too but hangs below the image; a checkpoint from a dirty tree of it is marked."""
    sha = "ab" * 20
    regs = Registries(default_registry="file://reg", base_dir=tmp_path)
    with regs:
        image = push_image(regs, sha)
        pushed = {}
        for step, commit, image_digest in ((1, sha, image), (2, sha + "-dirty", None)):
            source = tmp_path / f"step-{step}"
            source.mkdir()
            (source / "a.txt").write_text(str(step), encoding="utf-8")
            lineage = Lineage(git_commit=commit, image_digest=image_digest, step=step)
            ref = regs.ref(f"x/checkpoints:step-{step}")
            pushed[step] = store.push(regs, source=source, ref=ref, kind="checkpoint", lineage=lineage).digest
        graph = DownIndex.scan(regs, regs.root()).from_commit(sha[:10])
    assert graph.root == "git:" + sha and graph.nodes[graph.root].kind == "commit"
    assert graph.nodes[image].kind == "image" and graph.nodes[image].git_commit == sha
    assert {(e.child, e.relation, e.parent) for e in graph.edges} == {
        (image, "built-from", graph.root),
        (pushed[1], "image", image),
        (pushed[2], "built-from (dirty tree)", graph.root),
    }
