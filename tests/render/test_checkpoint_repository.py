"""One checkpoint-repository rule: what the pods are told (render) is what the CLI and the
watcher resolve (checkpoint.catalog), and both refuse a tag or digest naming the same field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.render.helpers import train, variant
from trainops.checkpoint.catalog import checkpoint_repository as resolved
from trainops.errors import InputError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.render.context import checkpoint_repository as rendered


def _both(manifest: Manifest) -> tuple[str, str]:
    spec, name, stage = manifest.pipeline.spec, manifest.pipeline.metadata.name, manifest.require_train()
    catalog = resolved(Registries.for_manifest(manifest), manifest=manifest, environ={})
    return rendered(spec, name, stage), catalog.repo_url


@pytest.mark.parametrize(
    "override",
    [None, "team/ckpts", "oci://registry.example.com/team/ckpts"],
    ids=["default", "relative", "absolute"],
)
def test_render_and_catalog_resolve_the_same_repository(tmp_path: Path, override: str | None) -> None:
    overlay = {"spec": {"registry": "oci://registry.example.com/llm"}}
    if override is not None:
        overlay["spec"].update(train({"checkpoint": {"repository": override}})["spec"])
    render_url, catalog_url = _both(variant(tmp_path, overlay))
    assert render_url == catalog_url
    assert render_url.startswith("oci://registry.example.com/")


def test_both_refuse_a_tag_naming_the_field(tmp_path: Path) -> None:
    overlay = {
        "spec": {
            "registry": "oci://registry.example.com/llm",
            **train({"checkpoint": {"repository": "oci://registry.example.com/team/ckpts:v1"}})["spec"],
        }
    }
    manifest = variant(tmp_path, overlay)
    said = r"^train\.checkpoint\.repository: .* names a tag or digest"
    with pytest.raises(InputError, match=said):
        rendered(manifest.pipeline.spec, manifest.pipeline.metadata.name, manifest.require_train())
    with pytest.raises(InputError, match=said):
        resolved(Registries.for_manifest(manifest), manifest=manifest, environ={})
