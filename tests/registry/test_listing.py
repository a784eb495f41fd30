"""Listing at scale: hundreds of tags on every backend, and paginated tag and repository lists."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from tests.registry.conftest import Target
from trainops.checkpoint import latest_checkpoint, list_checkpoints
from trainops.registry import listing as listing_mod
from trainops.registry import media
from trainops.registry.artifact import build_manifest
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend, Descriptor, ManifestData
from trainops.registry.backends.s3 import S3Backend
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import RegistryRoot
from trainops.registry.store import bytes_source
from trainops_testing.services import DistributionRegistry

LAYER = b"weights" * 100
CONFIG = b'{"schemaVersion":1}'
COUNT = 300


def _checkpoint(step: int, loss: float = 1.0) -> ManifestData:
    layer = bytes_source(LAYER)
    config = bytes_source(CONFIG)
    return build_manifest(
        kind="checkpoint",
        config=Descriptor(media.CONFIG, config.digest, config.size),
        layers=[Descriptor(media.WEIGHT_RAW, layer.digest, layer.size, {media.A_FILEPATH: "w.safetensors"})],
        created="2026-12-03T00:00:00Z",
        lineage=Lineage(step=step, metrics={"loss": loss}),
        annotations={},
    )


def _fill(backend: Backend, repo: str, tagged: dict[str, ManifestData]) -> None:
    for data in (LAYER, CONFIG):
        backend.upload_blob(repo, bytes_source(data))
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda item: backend.put_manifest(repo, item[1], tag=item[0]), tagged.items()))


def test_hundreds_of_tags_list_right_on_every_backend(target: Target) -> None:
    ref = target.registries.ref(target.ref("run/ckpt"))
    backend = target.registries.backend(ref)
    # steps 10 … 3000: by name step-990 sorts after step-3000, by step it does not
    tagged = {f"step-{i * 10}": _checkpoint(i * 10) for i in range(1, COUNT + 1)}
    tagged["best"] = tagged["step-1500"]
    tagged[f"{media.PRUNED_TAG_PREFIX}step-5"] = _checkpoint(5)
    _fill(backend, ref.repository, tagged)
    backend.put_manifest(ref.repository, tagged["step-20"], tag="best")  # a tag that moved

    names = listing_mod.list_repository(target.registries, ref=ref, details=False)
    assert [t.tag for t in names.tags] == sorted(t for t in tagged if not t.startswith("pruned-"))
    assert names.pruned_records == 1 and all(t.digest is None for t in names.tags)

    detailed = listing_mod.list_repository(target.registries, ref=ref)
    digests = {t.tag: t.digest for t in detailed.tags}
    expected = {t: m.digest for t, m in tagged.items() if not t.startswith("pruned-")}
    assert digests == {**expected, "best": tagged["step-20"].digest}
    assert {(t.kind, t.size) for t in detailed.tags} == {("checkpoint", len(LAYER))}

    checkpoints = list_checkpoints(target.registries, repository=ref)
    assert len(checkpoints) == COUNT + 1
    assert [c.step for c in checkpoints] == sorted([*range(10, 3001, 10), 20])
    latest = latest_checkpoint(target.registries, repository=ref)
    assert latest is not None and (latest.tag, latest.step) == ("step-3000", 3000)
    assert latest.digest == tagged["step-3000"].digest


def test_distribution_tags_and_catalog_are_read_page_by_page(registry: DistributionRegistry) -> None:
    ns = f"pages-{uuid.uuid4().hex[:8]}"
    backend = open_backend(RegistryRoot("oci", registry.host, ns), insecure=True)
    backend.page_size = backend.catalog_page_size = 7  # type: ignore[attr-defined]  # each request's `?n=`
    tagged = {f"v{i}": _checkpoint(i) for i in range(30)}
    _fill(backend, f"{ns}/model", tagged)
    for i in range(12):
        _fill(backend, f"{ns}/many/r{i:02d}", {"v0": tagged["v0"]})
    try:
        assert backend.list_tags(f"{ns}/model") == sorted(tagged)
        assert backend.list_repositories() == sorted([f"{ns}/model", *(f"{ns}/many/r{i:02d}" for i in range(12))])
    finally:
        backend.close()


def test_s3_tags_and_repositories_are_read_page_by_page(s3_bucket: str) -> None:
    backend = S3Backend(RegistryRoot("s3", s3_bucket, "reg"), page_size=7)
    tagged = {f"v{i}": _checkpoint(i) for i in range(30)}
    _fill(backend, "reg/model", tagged)
    for i in range(12):
        _fill(backend, f"reg/many/r{i:02d}", {"v0": tagged["v0"]})
    assert backend.list_tags("reg/model") == sorted(tagged)
    assert backend.list_repositories() == sorted(["reg/model", *(f"reg/many/r{i:02d}" for i in range(12))])
