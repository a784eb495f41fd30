"""Projects for the eval and release tests: a manifest on a file://, oci:// or s3:// registry,
and the `trainops` CLI run in-process against it."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops_testing.cli import Outcome, run

PYTHON = sys.executable


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for name in [n for n in os.environ if n.startswith(("TRAINOPS_", "TINY_LLM_"))]:
        if name != "TRAINOPS_CACHE_DIR":
            monkeypatch.delenv(name)


@dataclass
class Project:
    root: Path
    scheme: str
    registry_url: str
    insecure: tuple[str, ...] = ()

    @property
    def manifest(self) -> Path:
        return self.root / "trainops.yaml"

    def write(self, spec: dict[str, Any], environments: dict[str, Any] | None = None) -> None:
        doc: dict[str, Any] = {
            "apiVersion": "trainops.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "tiny-llm"},
            "spec": {"registry": self.registry_url, "insecureRegistries": list(self.insecure), **spec},
        }
        if environments:
            doc["environments"] = environments
        self.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    def registries(self) -> Registries:
        return Registries(default_registry=self.registry_url, base_dir=self.root, insecure_registries=self.insecure)

    def trainops(self, *args: str) -> Outcome:
        """`trainops ARGS -f trainops.yaml` in-process, from the project's directory."""
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            return run(*args, "-f", str(self.manifest))
        finally:
            os.chdir(cwd)

    def push_checkpoint(
        self, step: int, *, metrics: dict[str, float] | None = None, rows: int = 64, dedup: str = "off"
    ) -> str:
        """A small checkpoint (real safetensors, w of rows x 32 float32) pushed as
        tiny-llm/checkpoints:step-N (dedup="chunks": in the chunked form); its pinned ref."""
        src = self.root / "made" / f"step-{step}"
        src.mkdir(parents=True)
        tensors = {"w": np.full((rows, 32), step, dtype=np.float32), "b": np.zeros(8, np.float16)}
        save_file(tensors, str(src / "model.safetensors"))
        save_file({"m": np.zeros(4, np.float32)}, str(src / "optimizer.safetensors"))
        (src / "trainer_state.json").write_text(f'{{"step": {step}}}', encoding="utf-8")
        with self.registries() as regs:
            pushed = store.push(
                regs,
                source=src,
                ref=regs.ref(f"tiny-llm/checkpoints:step-{step}"),
                kind="checkpoint",
                lineage=Lineage(pipeline="tiny-llm", step=step, run_id="r1", metrics=metrics or {}),
                dedup=dedup,
            )
        return str(pushed.ref)


def _project(scheme: str, request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    if scheme == "file":
        return Project(root, scheme, "file://.trainops/registry")
    if scheme == "oci":
        registry = request.getfixturevalue("registry")
        return Project(root, scheme, f"oci://{registry.host}/e{uuid.uuid4().hex[:10]}", (registry.host,))
    bucket = request.getfixturevalue("s3_bucket")
    return Project(root, scheme, f"s3://{bucket}/reg")


@pytest.fixture(params=["file", "oci", "s3"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    """A project on each backend."""
    yield _project(request.param, request, tmp_path)


@pytest.fixture
def local_project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    """A project on a file:// registry."""
    yield _project("file", request, tmp_path)
