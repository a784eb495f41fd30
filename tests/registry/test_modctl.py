"""A model that modctl made (CNAI ModelPack namespace, a tar layer per file) pulls with its
file names, byte for byte, and shows as a model with its tensors; on file://, oci:// and s3://."""

from __future__ import annotations

from pathlib import Path

from tests.registry.conftest import Target
from tests.registry.modctl_layout import LAYERS, model_dir, push_modctl
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
