"""Chunked artifacts (push --dedup chunks) on file://, oci:// (Distribution) and s3:// (moto).

What is checked: the bytes pulled are the bytes pushed; a fine-tune series with half of its
tensors frozen sends about half of each checkpoint; a 1 MiB change re-sends little more than
1 MiB; every pack an index names is a layer of the manifest, read back with plain JSON (so
gc and copiers keep the artifact whole); damaged or hostile indexes fail the pull naming the
file with nothing written; a registry that ignores Range requests still serves chunked pulls.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from functools import partial
from pathlib import Path

import pytest

from tests.registry.conftest import Target
from trainops.errors import IntegrityError
from trainops.registry import media, pulling, store
from trainops.registry.artifact import build_manifest, canonical_json, parse_manifest
from trainops.registry.backends.base import BlobSource, Descriptor, sha256_digest
from trainops.registry.lineage_data import Lineage, Parent
from trainops_testing.finetune import FineTune, MiB, write_safetensors


def _push(target: Target, source: Path, tag: str, parent: str | None = None) -> store.PushResult:
    lineage = Lineage(parents=(Parent(digest=parent, ref="x", relation="parent"),) if parent else ())
    ref = target.registries.ref(target.ref(f"ft:{tag}"))
    return store.push(target.registries, source=source, ref=ref, kind="checkpoint", lineage=lineage, dedup="chunks")


def _pull(target: Target, tag: str, dest: Path) -> pulling.PullResult:
    return pulling.pull(target.registries, ref=target.registries.ref(target.ref(f"ft:{tag}")), dest=dest)


def _raw(target: Target, digest: str) -> dict[str, object]:
    ref = target.registries.ref(target.ref("ft"))
    data: dict[str, object] = json.loads(target.registries.backend(ref).get_manifest(ref.repository, digest).data)
    return data


def test_a_fine_tune_series_sends_only_what_changed_and_pulls_back_whole(target: Target, tmp_path: Path) -> None:
    series = FineTune(tensors=8, tensor_size=MiB)
    first = _push(target, series.checkpoint(tmp_path / "s1"), "step-1")
    second = _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=first.digest)
    assert first.bytes_sent >= first.bytes_total  # nothing to share with: all sent, plus the index
    assert second.bytes_sent <= 0.55 * second.bytes_total, second
    assert second.bytes_shared >= 4 * MiB
    for step in ("s1", "s2"):
        out = _pull(target, f"step-{step[1]}", tmp_path / f"out-{step}")
        for name in ("model.safetensors", "config.json"):
            assert (out.dest / name).read_bytes() == (tmp_path / step / name).read_bytes()
        assert not [p for p in out.dest.parent.iterdir() if "trainops-pull" in p.name]  # staging gone


def test_a_first_push_sends_each_file_whole_as_its_own_pack_and_the_next_reads_from_it(
    target: Target, tmp_path: Path
) -> None:
    series = FineTune(tensors=4, tensor_size=MiB)
    src = series.checkpoint(tmp_path / "s1")
    first = _push(target, src, "step-1")
    packs = [lay for lay in _raw(target, first.digest)["layers"] if lay["mediaType"] == media.CHUNK_PACK]  # type: ignore[index,union-attr]
    file_digest = sha256_digest((src / "model.safetensors").read_bytes())
    assert [(p["digest"], p["size"]) for p in packs] == [(file_digest, (src / "model.safetensors").stat().st_size)]
    second = _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=first.digest)
    second_packs = {
        lay["digest"] for lay in _raw(target, second.digest)["layers"] if lay["mediaType"] == media.CHUNK_PACK
    }  # type: ignore[index,union-attr]
    assert file_digest in second_packs and len(second_packs) == 2  # the frozen tensors from step-1's file
    assert second.bytes_sent <= 0.55 * second.bytes_total, second
    out = _pull(target, "step-1", tmp_path / "out")
    assert (out.dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()


def test_every_pack_an_index_names_is_a_layer_of_the_manifest(target: Target, tmp_path: Path) -> None:
    series = FineTune(tensors=4, tensor_size=MiB)
    first = _push(target, series.checkpoint(tmp_path / "s1"), "step-1")
    second = _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=first.digest)
    body = _raw(target, second.digest)
    layers = body["layers"]
    assert isinstance(layers, list)
    packs = {layer["digest"] for layer in layers if layer["mediaType"] == media.CHUNK_PACK}
    indexes = [layer for layer in layers if layer["mediaType"] == media.CHUNK_INDEX]
    assert [i["annotations"][media.A_CHUNKS_FILEPATH] for i in indexes] == ["model.safetensors"]
    ref = target.registries.ref(target.ref("ft"))
    backend = target.registries.backend(ref)
    named = set()
    for layer in indexes:
        index = json.loads(backend.read_range(ref.repository, layer["digest"], 0, layer["size"]))
        named |= set(index["packs"])
    assert named == packs  # reused packs of step-1 included, and nothing unused
    first_packs = {
        lay["digest"] for lay in _raw(target, first.digest)["layers"] if lay["mediaType"] == media.CHUNK_PACK
    }  # type: ignore[index,union-attr]
    assert first_packs & packs  # the frozen tensors are read from step-1's packs


def test_a_one_mib_change_re_sends_about_one_mib(target: Target, tmp_path: Path) -> None:
    size = 16 * MiB
    data = bytearray(os.urandom(size))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "blob.bin").write_bytes(data)
    first = _push(target, tmp_path / "a", "step-1")
    data[5 * MiB + 12345 : 6 * MiB + 12345] = os.urandom(MiB)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "blob.bin").write_bytes(data)
    second = _push(target, tmp_path / "b", "step-2", parent=first.digest)
    # the change, the chunks cut across its two edges (CDC resynchronises within a few chunks), the index
    assert MiB <= second.bytes_sent <= 2 * MiB, second
    assert (_pull(target, "step-2", tmp_path / "out").dest / "blob.bin").read_bytes() == bytes(data)


def _tamper(target: Target, digest: str, change: str) -> str:
    """A copy of a chunked manifest with one thing broken; the new manifest's digest."""
    ref = target.registries.ref(target.ref("ft"))
    backend = target.registries.backend(ref)
    parsed = parse_manifest(backend.get_manifest(ref.repository, digest))
    layers = list(parsed.layers)
    if change == "drop-pack":
        layers = [layer for layer in layers if layer != _first_pack(layers)]
    else:
        at = next(i for i, layer in enumerate(layers) if layer.media_type == media.CHUNK_INDEX)
        index = json.loads(backend.read_range(ref.repository, layers[at].digest, 0, layers[at].size))
        if change == "past-end":
            index["chunks"][-1][1] = 70 * MiB  # offset past any pack's end
        else:  # "bad-digest": a chunk whose bytes do not hash to what the index says
            index["chunks"][3][3] = "0" * 64
        data = canonical_json(index)
        backend.upload_blob(ref.repository, BlobSource(sha256_digest(data), len(data), path=_write(data)))
        layers[at] = Descriptor(media.CHUNK_INDEX, sha256_digest(data), len(data), layers[at].annotations)
    assert parsed.config is not None
    manifest = build_manifest(
        kind="checkpoint",
        config=parsed.config,
        layers=layers,
        created=parsed.created or "",
        lineage=Lineage(),
        annotations={},
    )
    backend.put_manifest(ref.repository, manifest, tag=f"bad-{change}")
    return manifest.digest


def _first_pack(layers: list[Descriptor]) -> Descriptor:
    return next(layer for layer in layers if layer.media_type == media.CHUNK_PACK)


def _write(data: bytes) -> Path:
    import tempfile

    fd, name = tempfile.mkstemp()
    os.write(fd, data)
    os.close(fd)
    return Path(name)


@pytest.mark.parametrize("which", ["first", "second"])  # a file that is its own pack; one read from packs
@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("drop-pack", "which is not a layer of the manifest"),
        ("past-end", "runs past the end of pack"),
        ("bad-digest", "does not match its digest"),
    ],
)
def test_a_bad_chunk_index_fails_the_pull_naming_the_file_with_nothing_written(
    target: Target, tmp_path: Path, change: str, says: str, which: str
) -> None:
    series = FineTune(tensors=4, tensor_size=MiB)
    pushed = _push(target, series.checkpoint(tmp_path / "s1"), "step-1")
    if which == "second":
        pushed = _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=pushed.digest)
    _tamper(target, pushed.digest, change)
    dest = tmp_path / "dest"
    with pytest.raises(IntegrityError) as caught:
        _pull(target, f"bad-{change}", dest)
    assert "model.safetensors" in str(caught.value) and says in str(caught.value)
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if "trainops-pull" in p.name]


def test_gc_keeps_a_chunked_checkpoint_whole_after_its_parent_is_removed(target: Target, tmp_path: Path) -> None:
    from trainops.registry.retention.gc import collect

    series = FineTune(tensors=4, tensor_size=MiB)
    first = _push(target, series.checkpoint(tmp_path / "s1"), "step-1")
    _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=first.digest)
    ref = target.registries.ref(target.ref("ft"))
    target.registries.backend(ref).delete_manifest(ref.repository, first.digest)
    swept = collect(target.registries, root=target.registries.root(), grace=0.0)
    if target.scheme != "oci":  # on oci:// the registry's own gc reclaims blobs
        assert swept.removed_blobs  # step-1's config and index went; its packs stay: step-2 names them
    out = _pull(target, "step-2", tmp_path / "out")
    assert (out.dest / "model.safetensors").read_bytes() == (tmp_path / "s2" / "model.safetensors").read_bytes()


def test_a_registry_that_ignores_range_is_said_once_and_serves_whole_packs(
    registry: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.registry.proxy import FaultProxy
    from trainops.registry.context import Registries

    host = registry.host  # type: ignore[attr-defined]
    series = FineTune(tensors=6, tensor_size=MiB)
    source = series.checkpoint(tmp_path / "s1")
    with FaultProxy(host) as proxy:
        proxy.strip_range = True
        url = f"oci://{proxy.host}/norange"
        with Registries(default_registry=url, insecure_registries=(proxy.host,)) as registries:
            ref = registries.ref(f"{url}/ft:step-1")
            store.push(registries, source=source, ref=ref, kind="checkpoint", dedup="chunks")
            caplog.set_level(logging.WARNING)
            out = pulling.pull(registries, ref=ref, dest=tmp_path / "out")
    assert (out.dest / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    said = [r for r in caplog.records if "ignores HTTP Range" in r.getMessage()]
    assert len(said) == 1
    packs = [p for m, p, _ in proxy.seen if m == "GET" and "/blobs/sha256:" in p]
    assert packs  # served without Range, and each pack read whole at most once more
    assert not list(tmp_path.glob(".out.trainops-pull-*"))


def test_small_files_stay_plain_layers_and_a_plain_reader_sees_the_file_view(target: Target, tmp_path: Path) -> None:
    from trainops.registry.inspect import diff, show

    series = FineTune(tensors=4, tensor_size=MiB)
    first = _push(target, series.checkpoint(tmp_path / "s1"), "step-1")
    second = _push(target, series.checkpoint(tmp_path / "s2"), "step-2", parent=first.digest)
    info = show(target.registries, ref=target.registries.ref(target.ref("ft:step-2")))
    assert [f.path for f in info.files] == ["config.json", "model.safetensors"]
    model = next(f for f in info.files if f.path == "model.safetensors")
    assert model.size == (tmp_path / "s2" / "model.safetensors").stat().st_size
    assert info.chunked is not None and info.chunked.parent == first.digest
    assert info.chunked.bytes_shared_with_parent == second.bytes_shared + len('{"model_type": "tiny"}')
    changes = diff(
        target.registries,
        a=target.registries.ref(target.ref("ft:step-1")),
        b=target.registries.ref(target.ref("ft:step-2")),
    )
    assert [c.path for c in changes.modified] == ["model.safetensors"]
    assert changes.chunk_bytes_shared == info.chunked.bytes_shared_with_parent


def test_tensor_boundaries_are_cuts(tmp_path: Path) -> None:
    from trainops.registry.chunks.chunker import Chunker

    tensors = [("a", os.urandom(300 * 1024)), ("b", os.urandom(20 * 1024)), ("c", os.urandom(500 * 1024))]
    path = write_safetensors(tmp_path / "m.safetensors", tensors)
    size = path.stat().st_size
    header = size - sum(len(d) for _, d in tensors)
    with Chunker() as chunker, path.open("rb") as fh:
        chunks = list(chunker.chunks(fh, path, size))
        starts = {c.offset for c in chunks}
        assert sum(len(c.data) for c in chunks) == size
    assert {header, header + 300 * 1024, header + 320 * 1024} <= starts
    shutil.rmtree(tmp_path)


def test_a_re_push_of_unchanged_files_reads_none_and_sends_nothing(target: Target, tmp_path: Path) -> None:
    from trainops.registry.digestcache import DigestCache

    series = FineTune(tensors=4, tensor_size=MiB)
    src = series.checkpoint(tmp_path / "s1")
    first = _push(target, src, "step-1")
    cache = DigestCache()
    ref = target.registries.ref(target.ref("ft:step-2"))
    # the digest cache is warm from the first push: the file's known index is reused unread
    again = store.push(target.registries, source=src, ref=ref, kind="checkpoint", dedup="chunks", cache=cache)
    assert cache.misses == 0 and cache.hits >= 1
    assert again.bytes_sent == 0 and again.digest == first.digest  # same tree, same manifest
    assert again.bytes_shared == (src / "model.safetensors").stat().st_size


def _stored(target: Target, request: pytest.FixtureRequest) -> set[str]:
    """Every blob the registry stores: its own listing (file://, s3://), or Distribution's
    content-addressed store on disk (its API cannot list blobs)."""
    if target.scheme == "oci":
        data_dir: Path = request.getfixturevalue("registry").data_dir
        blobs = data_dir / "docker" / "registry" / "v2" / "blobs" / "sha256"
        return {f"sha256:{p.parent.name}" for p in blobs.glob("*/*/data")}
    ref = target.registries.ref(target.ref("ft"))
    return set(target.registries.backend(ref).list_blobs(ref.repository) or [])


@pytest.mark.parametrize("others", [0, 5], ids=["no-step-tags", "five-newer-step-tags"])
def test_an_unchanged_re_push_under_an_unrelated_tag_sends_only_the_manifest(
    target: Target, tmp_path: Path, request: pytest.FixtureRequest, others: int
) -> None:
    """The repository holds the file's index under a tag that is neither a parent, nor the
    tag pushed, nor among the newest step-N checkpoints (others: of unrelated data, newer).
    The file was pushed chunked (it shares tensors with its parent), so its bytes are in
    packs, not in a blob of the whole file."""
    from trainops.registry.digestcache import DigestCache

    series = FineTune(tensors=4, tensor_size=2 * MiB)
    base = _push(target, series.checkpoint(tmp_path / "s0"), "base")
    src = series.checkpoint(tmp_path / "s1")
    first = _push(target, src, "alpha", parent=base.digest)
    for n in range(others):
        _push(target, FineTune(tensors=2, tensor_size=MiB).checkpoint(tmp_path / f"o{n}"), f"step-{n + 1}")
    before = _stored(target, request)
    cache = DigestCache()
    lineage = Lineage(parents=(Parent(digest=base.digest, ref="x", relation="parent"),))
    ref = target.registries.ref(target.ref("ft:beta"))
    push = partial(store.push, target.registries, source=src, kind="checkpoint", dedup="chunks", cache=cache)
    again = push(ref=ref, lineage=lineage)  # the same command under another tag
    assert cache.misses == 0  # the file was not even read
    assert again.digest == first.digest and again.bytes_sent == 0, again
    assert again.bytes_shared == (src / "model.safetensors").stat().st_size
    assert _stored(target, request) == before  # no blob stored: the manifest (already held) is all
    # without the lineage: a manifest and a config of its own (it records the lineage; base,
    # pushed without one in the same second, may have the same)
    bare = push(ref=ref.with_tag("gamma"))
    config = parse_manifest(target.registries.backend(ref).get_manifest(ref.repository, bare.digest)).config
    assert config is not None and bare.bytes_sent <= config.size and cache.misses == 0, bare
    assert _stored(target, request) - before <= {config.digest, bare.digest}
    for tag in ("beta", "gamma"):
        out = _pull(target, tag, tmp_path / tag)
        assert (out.dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
