"""Helpers of the image build tests: projects in git repositories, subprocess runs, layouts."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops_testing.services import git_env

BASE_REPO = "base/busybox"


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, check: bool = True) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def git(repo: Path, *args: str) -> str:
    return run(["git", "-C", str(repo), *args], env=git_env()).strip()


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    return root


def manifest_text(
    *,
    registry: str,
    builder: str = "layer",
    base: str | None = f"{BASE_REPO}:latest",
    params: dict[str, Any] | None = None,
    extra: str = "",
    insecure: str | None = None,
    name: str = "demo",
) -> str:
    """A trainops.yaml whose image section the busybox base can build (no PyTorch install)."""
    p = {"installPytorch": False, "installProject": False, "trainopsRequirement": "", **(params or {})}
    lines = [
        "apiVersion: trainops.dev/v1alpha1",
        "kind: Pipeline",
        f"metadata: {{name: {name}}}",
        "spec:",
        f"  registry: {registry}",
    ]
    if insecure:
        lines.append(f'  insecureRegistries: ["{insecure}"]')
    lines += ["  image:", "    template: train-pytorch", f"    builder: {builder}"]
    if base:
        lines.append(f"    base: {base}")
    lines.append(f"    params: {json.dumps(p)}")
    lines += [f"    {line}" for line in extra.strip().splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def make_project(
    root: Path, files: dict[str, str | bytes], manifest: str, *, commit: bool = True, executable: tuple[str, ...] = ()
) -> Path:
    """A project directory (a git repository with one commit, unless commit=False)."""
    root.mkdir(parents=True, exist_ok=True)
    write_tree(root, {**files, "trainops.yaml": manifest})
    for rel in executable:
        os.chmod(root / rel, 0o755)
    if commit:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "project")
    return root / "trainops.yaml"


@dataclass(frozen=True)
class Layout:
    """A file:// registry root holding the busybox base at base/busybox:latest."""

    root: Path

    @property
    def url(self) -> str:
        return f"file://{self.root}"

    def repo(self, name: str) -> Path:
        return self.root / name


def skopeo_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(run(["skopeo", *args], env=env))


def layer_names(blob: Path) -> list[str]:
    """Member names of an (uncompressed or gzip) layer tar."""
    with tarfile.open(blob) as tar:
        return tar.getnames()


def blob_path(layout_repo: Path, digest: str) -> Path:
    return layout_repo / "blobs" / "sha256" / digest.split(":", 1)[1]


def env_with(**values: str) -> dict[str, str]:
    return {**os.environ, **values}
