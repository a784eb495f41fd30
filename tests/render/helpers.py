"""Manifests for the render tests: the tiny-llm example with overlays, written to real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops.manifest import Manifest, load_manifest
from trainops.render import Rendered, render_all
from trainops_testing.projects import write_variant

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"harbor.example.com/llm/tiny-llm/image@{DIGEST}"
RUN_ID = "run-20250101-000000-abc123"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def variant(directory: Path, overlay: dict[str, Any] | None = None) -> Manifest:
    return load_manifest(write_variant(directory, overlay))


def train(overlay: dict[str, Any]) -> dict[str, Any]:
    """An overlay of spec.train."""
    return {"spec": {"train": overlay}}


def render(manifest: Manifest, **kwargs: Any) -> Rendered:
    return render_all(manifest, image=kwargs.pop("image", IMAGE), run_id=kwargs.pop("run_id", RUN_ID), **kwargs)


def only(rendered: Rendered, kind: str) -> dict[str, Any]:
    found = [obj for obj in rendered.objects if obj["kind"] == kind]
    assert len(found) == 1, [o["kind"] for o in rendered.objects]
    return found[0]


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod templates of a rendered job, by role label."""
    out: dict[str, dict[str, Any]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            tmpl = node.get("template")
            if isinstance(tmpl, dict) and "containers" in (tmpl.get("spec") or {}):
                out[tmpl["metadata"]["labels"]["trainops.dev/role"]] = tmpl
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(obj)
    return out


def container(template: dict[str, Any], name: str) -> dict[str, Any]:
    spec = template["spec"]
    for item in [*spec.get("initContainers", []), *spec["containers"]]:
        if item["name"] == name:
            return dict(item)
    raise AssertionError(f"no container {name}")


def env_of(item: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in item.get("env", [])}
