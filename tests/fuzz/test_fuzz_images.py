"""Fuzzing (hypothesis) of base images read by the layer builder: hostile indexes and configs.

The layer builder reads a base image that anyone with push rights wrote: its image index,
manifest and config. A malformed one must end in a one-line TrainopsError.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainops.errors import TrainopsError
from trainops.image.image import Platform, resolve_image
from trainops.registry import media
from trainops.registry.backends.base import BlobSource, ManifestData, sha256_digest
from trainops.registry.context import Registries

FUZZ = settings(max_examples=200, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=12,
)
configs = st.one_of(
    st.fixed_dictionaries(
        {"os": st.sampled_from(["linux", 5, None]), "architecture": st.sampled_from(["amd64", "arm64", [], None])},
        optional={
            "rootfs": st.one_of(
                st.just({"type": "layers", "diff_ids": []}),
                json_values,
                st.just({"diff_ids": "abc"}),
                st.just({"diff_ids": [1]}),
            ),
            "variant": json_values,
            "config": json_values,
        },
    ),
    json_values,
    st.just("not json {"),
)
platform_entries = st.one_of(
    st.fixed_dictionaries(
        {
            "mediaType": st.just(media.OCI_MANIFEST),
            "digest": st.sampled_from(["CHILD", "sha256:" + "0" * 64, "../../etc/passwd", "", 7]),
            "size": st.integers(0, 10),
        },
        optional={"platform": st.one_of(st.just({"os": "linux", "architecture": "amd64"}), json_values)},
    ),
    json_values,
)


def _put_blob(backend: Any, repo: str, data: bytes, tmp: Any) -> str:
    path = tmp / f"b-{sha256_digest(data)[7:19]}"
    path.write_bytes(data)
    backend.upload_blob(repo, BlobSource(digest=sha256_digest(data), size=len(data), path=path))
    return sha256_digest(data)


@FUZZ
@given(
    config=configs,
    layer_type=st.sampled_from([LAYER, "application/x-unknown", 5]),
    use_index=st.booleans(),
    entries=st.lists(platform_entries, max_size=3),
    index_manifests=st.one_of(st.just(None), json_values),
)
def test_resolve_a_hostile_base_image(
    config: Any,
    layer_type: Any,
    use_index: bool,
    entries: list[Any],
    index_manifests: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    work = tmp_path_factory.mktemp("img")
    registries = Registries(default_registry=f"file://{work / 'reg'}")
    ref = registries.ref("base:v1")
    backend = registries.backend(ref)
    (work / "seed").write_text("x")
    from trainops.registry import store

    store.push(registries, source=work / "seed", ref=registries.ref("base:seed"))  # creates the layout
    cfg = config.encode() if isinstance(config, str) else json.dumps(config).encode()
    repo = ref.repository  # on file:// the layout's directory
    cfg_digest = _put_blob(backend, repo, cfg, work)
    layer_digest = _put_blob(backend, repo, b"layer bytes", work)
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": cfg_digest, "size": len(cfg)},
        "layers": [{"mediaType": layer_type, "digest": layer_digest, "size": 11}],
    }
    data = json.dumps(body).encode()
    child = ManifestData(data, media.OCI_MANIFEST, sha256_digest(data))
    backend.put_manifest(repo, child, tag=None if use_index else "v1")
    if use_index:
        listed = [
            {**e, "digest": child.digest} if isinstance(e, dict) and e.get("digest") == "CHILD" else e for e in entries
        ]
        index = {"schemaVersion": 2, "mediaType": media.OCI_INDEX, "manifests": listed}
        if index_manifests is not None:
            index["manifests"] = index_manifests
        raw = json.dumps(index).encode()
        backend.put_manifest(repo, ManifestData(raw, media.OCI_INDEX, sha256_digest(raw)), tag="v1")
    try:
        image = resolve_image(registries, ref, Platform.parse("linux/amd64"))
    except TrainopsError as err:
        assert str(err).strip() and "Traceback" not in str(err)
        return
    assert image.config_descriptor.digest == cfg_digest
    assert isinstance(image.config, dict)
