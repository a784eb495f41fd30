"""The ray target: the RayJob's entrypoint is train.command and nothing else, its cluster is
the manifest's nodes, and its name fits what KubeRay accepts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import only, render, variant
from trainops.errors import ManifestError
from trainops.render.ray import MAX_NAME
from trainops_testing.cli import run
from trainops_testing.projects import write_variant

IMAGE = "registry.example.com/llm/tiny-llm/image@sha256:" + "ab" * 32
RAY = {"scheduler": "ray", "topology": None}


def _ray(overlay: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """The example on the ray target (its patch of the Volcano Job dropped), with `overlay` over spec.train."""
    return {"spec": {"train": {**RAY, **(overlay or {})}, "patches": None, **spec}}


def test_the_entrypoint_is_train_command_quoted_for_the_shell(tmp_path: Path) -> None:
    command = ["python", "-m", "tiny_llm.train", "--note", "it's $HOME; rm -rf /", "--glob", "*"]
    job = only(render(variant(tmp_path, _ray({"command": command}))), "RayJob")
    assert shlex.split(job["spec"]["entrypoint"]) == command
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "command" not in head["containers"][0]  # KubeRay's `ray start`, not ours
    assert [c["name"] for c in head["initContainers"]][-1] == "ckpt-watch"


def test_the_cluster_is_the_manifests_nodes(tmp_path: Path) -> None:
    job = only(render(variant(tmp_path, _ray({"nodes": 5, "gpusPerNode": 4}))), "RayJob")
    cluster = job["spec"]["rayClusterSpec"]
    (workers,) = cluster["workerGroupSpecs"]
    assert workers["replicas"] == workers["minReplicas"] == workers["maxReplicas"] == 4
    for group in (cluster["headGroupSpec"], workers):
        assert group["rayStartParams"] == {"num-gpus": "4"}
        assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert len(job["metadata"]["name"]) <= MAX_NAME


def test_a_long_pipeline_name_still_fits_kuberays_limit(tmp_path: Path) -> None:
    job = only(render(variant(tmp_path, {"metadata": {"name": "a" * 40}, **_ray()})), "RayJob")
    assert len(job["metadata"]["name"]) <= MAX_NAME


def _entrypoint_line(path: Path) -> tuple[int, int]:
    """Line and column of the patch's `entrypoint` key in the written manifest."""
    for number, row in enumerate(path.read_text().splitlines(), 1):
        if "entrypoint:" in row:
            return number, row.index("entrypoint") + 1
    raise AssertionError(f"no entrypoint in {path}")


def test_a_patch_giving_another_entrypoint_is_refused_at_its_line(tmp_path: Path) -> None:
    patch = {"target": {"kind": "RayJob"}, "merge": {"spec": {"entrypoint": "python other.py"}}}
    manifest = variant(tmp_path, _ray(patches=[patch]))
    line, column = _entrypoint_line(manifest.path)
    with pytest.raises(ManifestError) as err:
        render(manifest)
    assert str(err.value).startswith(
        f"{manifest.path}:{line}:{column}: spec.patches[0].merge.spec.entrypoint: the RayJob's entrypoint is "
        "train.command ('python -m tiny_llm.train'), not 'python other.py'; change train.command"
    )


def test_validate_render_and_train_render_say_so_in_one_line(tmp_path: Path) -> None:
    patch = {"target": {"kind": "RayJob"}, "merge": {"spec": {"entrypoint": "python other.py"}}}
    path = write_variant(tmp_path, _ray(patches=[patch]))
    line, column = _entrypoint_line(path)
    for argv in (["validate", "--render"], ["train", "render", "--image", IMAGE, "--run-id", "r1"]):
        out = run(*argv, "-f", str(path))
        assert out.code == 3, out.stdout + out.stderr
        said = [row for row in out.stdout.splitlines() + out.stderr.splitlines() if "entrypoint" in row]
        assert len(said) == 1 and f"{path}:{line}:{column}: spec.patches[0].merge.spec.entrypoint: " in said[0], said
        assert "Traceback" not in out.stderr
