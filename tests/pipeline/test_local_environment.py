"""A local run's environment names its pinned image (a Reference) the way pods do."""

from __future__ import annotations

from pathlib import Path

from tests.render.helpers import variant
from trainops import podenv
from trainops.registry.reference import parse_reference
from trainops.train.local import local_environment

DIGEST = "sha256:" + "cd" * 32


def test_the_pinned_image_and_its_digest(tmp_path: Path) -> None:
    manifest = variant(tmp_path)
    repository = parse_reference("oci://registry.example.com/llm/checkpoints")
    image = parse_reference(f"oci://registry.example.com/llm/image:v1@{DIGEST}")
    env, _ = local_environment(manifest, run_id="r1", ckpt_dir=tmp_path, repository=repository, image=image, base={})
    assert env[podenv.IMAGE] == f"registry.example.com/llm/image@{DIGEST}"
    assert env[podenv.IMAGE_DIGEST] == DIGEST
    bare, _ = local_environment(manifest, run_id="r1", ckpt_dir=tmp_path, repository=repository, image=None, base={})
    assert podenv.IMAGE not in bare and podenv.IMAGE_DIGEST not in bare
