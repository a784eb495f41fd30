"""A tiny-llm project in a temporary git repository, for `trainops run` and `trainops ci` tests.

The project is a copy of examples/tiny-llm's code and corpus (so that a change to its code
changes the source digest, and is the code that runs), with a manifest for the local
scheduler and a short training run. trainops runs as a separate process, as a user runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops.registry.context import Registries
from trainops_testing.services import git_env, require

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny-llm"
TRAINOPS = [sys.executable, "-m", "trainops.cli.main"]


def base_manifest(max_steps: int = 200) -> dict[str, Any]:
    return {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "tiny-llm"},
        "spec": {
            "registry": "file://.trainops/registry",
            "gitops": {"repo": "file://.trainops/gitops.git", "path": "clusters/dev"},
            "image": {
                "template": "train-pytorch",
                "builder": "docker",
                "include": ["tiny_llm/**", "data/**"],
                "exclude": ["**/__pycache__/**"],
            },
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [sys.executable, "-m", "tiny_llm.train"],
                "env": {"TRAINOPS_MAX_STEPS": str(max_steps), "TRAINOPS_CKPT_EVERY": "100"},
                "checkpoint": {
                    "layout": "trainops",
                    "keep": {"last": 3, "best": 1, "metric": "val_loss", "mode": "min"},
                },
            },
        },
    }


@dataclass
class Project:
    root: Path
    cache: Path

    @property
    def manifest(self) -> Path:
        return self.root / "trainops.yaml"

    def write_manifest(self, doc: dict[str, Any]) -> None:
        self.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "TINY_LLM_", "GITHUB_", "CI_"))}
        env.pop("GITLAB_CI", None)
        env.update(
            git_env(env),
            TRAINOPS_CACHE_DIR=str(self.cache),
            # no engine here: the image stage must say so (the socket does not exist)
            DOCKER_HOST=f"unix://{self.root.parent}/no-engine.sock",
            PYTHONPATH=str(REPO),
        )
        env.update(extra)
        return env

    def trainops(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*TRAINOPS, *args],
            cwd=self.root,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def run_json(self, *args: str) -> dict[str, Any]:
        done = self.trainops("run", *args, "-o", "json")
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def git(self, *args: str) -> str:
        git = require("git", "apt-get install -y git")
        out = subprocess.run([git, *args], cwd=self.root, env=self.env(), capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def registries(self) -> Registries:
        return Registries(default_registry="file://.trainops/registry", base_dir=self.root)


def make_project(tmp: Path, doc: dict[str, Any] | None = None) -> Project:
    root = tmp / "proj"
    root.mkdir(parents=True)
    shutil.copytree(EXAMPLE / "tiny_llm", root / "tiny_llm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXAMPLE / "data", root / "data")
    (root / "README.md").write_text("# tiny-llm\n", encoding="utf-8")
    (root / ".gitignore").write_text(".trainops/\n__pycache__/\n", encoding="utf-8")
    project = Project(root, tmp / "cache")
    project.write_manifest(doc or base_manifest())
    project.git("init", "-q", "-b", "main")
    project.commit("tiny-llm")
    return project


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {stage["name"]: stage for stage in result["stages"]}
