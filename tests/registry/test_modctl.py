"""A model that modctl made (CNAI ModelPack namespace, a tar layer per file) pulls with its
file names, byte for byte, and shows as a model with its tensors; a tar layer that holds
anything but its one file is refused with nothing written; on file://, oci:// and s3://."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.registry.conftest import Target
from tests.registry.modctl_layout import ARTIFACT_TYPE, CNAI, CONFIG_TYPE, FILEPATH, LAYERS, model_dir, push_modctl
from trainops.registry import pulling, tensors


def test_a_modctl_model_pulls_with_its_file_names_and_shows_its_tensors(target: Target, tmp_path: Path) -> None:
    model = model_dir(tmp_path / "model")
    ref = target.registries.ref(target.ref("imported/tiny:v1"))
    push_modctl(target.registries.backend(ref), ref.repository, "v1", model)
    pulled = pulling.pull(target.registries, ref=ref, dest=tmp_path / "out")
    assert sorted(pulled.files) == sorted(LAYERS)
    for relpath in LAYERS:
        assert (pulled.dest / relpath).read_bytes() == (model / relpath).read_bytes(), relpath
    assert not list(tmp_path.glob(".out.trainops-pull-*"))  # staging gone
    shown = tensors.show(target.registries, ref=ref)
    assert shown.kind == "model"
    assert shown.tensors is not None and not shown.tensors.unreadable
    assert (shown.tensors.tensors, shown.tensors.parameters) == (2, 64 * 16 + 16)
    assert shown.tensors.dtypes == {"F32": 64 * 16, "F16": 16}


def _tar_of(members: list[tuple[str, bytes | None]]) -> bytes:
    """A tar of regular files (bytes) and symlinks (None: a link to /etc/passwd)."""
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ([("model.safetensors", None)], "not a regular file"),
        ([("model.safetensors", b"a"), ("extra.bin", b"b")], "more than one file"),
        ([("../escape.safetensors", b"a")], "not the layer's file"),
    ],
    ids=["symlink", "two-files", "other-name"],
)
def test_a_hostile_tar_layer_is_refused_naming_the_file_with_nothing_written(
    target: Target, tmp_path: Path, members: list[tuple[str, bytes | None]], says: str
) -> None:
    import io
    import json

    from trainops.errors import IntegrityError
    from trainops.registry.backends.base import BlobSource, Descriptor, ManifestData, sha256_digest

    ref = target.registries.ref(target.ref("imported/bad:v1"))
    backend = target.registries.backend(ref)
    data, config = _tar_of(members), b"{}"
    for blob in (data, config):
        backend.upload_blob(
            ref.repository, BlobSource(sha256_digest(blob), len(blob), opener=lambda b=blob: io.BytesIO(b))
        )
    layer = Descriptor(f"{CNAI}.weight.v1.tar", sha256_digest(data), len(data), {FILEPATH: "model.safetensors"})
    body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": ARTIFACT_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": sha256_digest(config), "size": len(config)},
            "layers": [layer.as_oci()],
        }
    ).encode()
    backend.put_manifest(
        ref.repository, ManifestData(body, "application/vnd.oci.image.manifest.v1+json", sha256_digest(body)), tag="v1"
    )
    with pytest.raises(IntegrityError, match=says) as err:
        pulling.pull(target.registries, ref=ref, dest=tmp_path / "out")
    assert "model.safetensors" in err.value.message
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.trainops-pull-*"))
