"""Fixtures for the serving tests: an isolated git environment and a project with model releases.

`project` is a directory holding the tiny-llm manifest (file:// registry and a bare GitOps
repo beside it), with two model artifacts pushed as releases v1 and v2 and one checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.runner import run
from tests.render.helpers import write_variant
from trainops_testing.services import bare_git_repo, git_env

IMAGE = "harbor.example.com/llm/tiny-llm/serve-vllm@sha256:" + "ab" * 32


@dataclass(frozen=True)
class Project:
    root: Path
    manifest: Path
    gitops: Path  # the bare GitOps repository

    def cli(self, *args: str) -> list[str]:
        return [*args, "-f", str(self.manifest)]


@pytest.fixture(autouse=True)
def _git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)  # no cluster here: promote must not read the caller's


def push_model(project: Path, manifest: Path, name: str, content: str, kind: str = "model") -> None:
    source = project / "sources" / name.replace(":", "-").replace("/", "-")
    source.mkdir(parents=True)
    (source / "config.json").write_text(content)
    outcome = run("push", str(source), name, "--kind", kind, "-f", str(manifest))
    assert outcome.code == 0, outcome.stderr


def make_project(root: Path, overlay: dict[str, object] | None = None) -> Project:
    spec = {
        "registry": "file://.trainops/registry",
        "gitops": {"repo": "file://gitops.git", "branch": "main", "path": "clusters/dev"},
    }
    data: dict[str, object] = {"spec": spec}
    if overlay:
        data = {"spec": {**spec, **dict(overlay.get("spec", {}))}}  # type: ignore[arg-type]
    manifest = write_variant(root, data)
    gitops = bare_git_repo(root / "gitops.git")
    for tag, content in (("v1", '{"v": 1}'), ("v2", '{"v": 2}'), ("v3", '{"v": 3}')):
        push_model(root, manifest, f"tiny-llm/model:{tag}", content)
    push_model(root, manifest, "tiny-llm/checkpoints:step-1", '{"c": 1}', kind="checkpoint")
    return Project(root, manifest, gitops)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")
