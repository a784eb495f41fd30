"""The Store API on every backend: push, pull, copy, tag, ls, show, diff, rm, gc, lineage."""

from __future__ import annotations

import fcntl
import filecmp
import hashlib
import json
import os
import threading
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.registry.conftest import Target, make_tree
from trainops.errors import InputError, NotFoundError, RemoteError
from trainops.registry import listing as listing_mod
from trainops.registry import pulling, store
from trainops.registry.backends import local
from trainops.registry.backends.base import BlobSource, ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.inspect import diff, show
from trainops.registry.lineage import lineage_graph, to_dot, to_mermaid, to_tree
from trainops.registry.lineage_data import Lineage
from trainops.registry.parents import pin_parents
from trainops.registry.retention import removal
from trainops.registry.retention.gc import collect


def _checkpoint(root: Path, step: int, weights: bytes | None = None) -> Path:
    return make_tree(
        root,
        {
            "model.safetensors": weights if weights is not None else os.urandom(512 * 1024),
            "tokenizer.json": b'{"vocab": "abc"}',
            "trainer_state.json": json.dumps({"step": step}).encode(),
            "scripts/run.sh": b"#!/bin/sh\necho hi\n",
        },
    )


def test_push_pull_round_trip(target: Target, tmp_path: Path) -> None:
    src = _checkpoint(tmp_path / "ckpt", 100)
    (src / "scripts/run.sh").chmod(0o755)
    (src / "copy-of-tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    reg = target.registries
    pushed = store.push(
        reg,
        source=src,
        ref=reg.ref("tiny/ckpt:step-100"),
        kind="checkpoint",
        lineage=Lineage(step=100, metrics={"val_loss": 2.5}),
    )
    assert pushed.files == 5
    dest = tmp_path / "out"
    pulled = pulling.pull(reg, ref=reg.ref("tiny/ckpt:step-100"), dest=dest)
    assert pulled.digest == pushed.digest
    assert sorted(pulled.files) == sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file())
    match, mismatch, errors = filecmp.cmpfiles(src, dest, pulled.files, shallow=False)
    assert not mismatch and not errors and len(match) == 5
    assert os.access(dest / "scripts/run.sh", os.X_OK)
    assert not os.access(dest / "tokenizer.json", os.X_OK)
    assert [p.name for p in dest.iterdir() if p.name.startswith(".")] == []


def test_repush_unchanged_sends_nothing_and_keeps_digest(target: Target, tmp_path: Path) -> None:
    src = _checkpoint(tmp_path / "ckpt", 1)
    reg = target.registries
    first = store.push(reg, source=src, ref=reg.ref("m/c:a"), kind="checkpoint")
    again = store.push(reg, source=src, ref=reg.ref("m/c:a"), kind="checkpoint")
    assert again.digest == first.digest
    assert again.bytes_sent == 0
    assert again.cache_hits >= 4


def test_second_checkpoint_sends_only_what_changed(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    store.push(reg, source=_checkpoint(tmp_path / "a", 1), ref=reg.ref("m/c:1"), kind="checkpoint")
    b = _checkpoint(tmp_path / "b", 2)
    (b / "tokenizer.json").write_bytes((tmp_path / "a/tokenizer.json").read_bytes())
    (b / "scripts/run.sh").write_bytes((tmp_path / "a/scripts/run.sh").read_bytes())
    second = store.push(reg, source=b, ref=reg.ref("m/c:2"), kind="checkpoint")
    changed = (b / "model.safetensors").stat().st_size + (b / "trainer_state.json").stat().st_size
    assert changed <= second.bytes_sent < changed + 4096  # plus the small config blob
    assert second.blobs_skipped >= 2  # tokenizer and script (the config may match too)


def test_ls_show_and_diff(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    weights = os.urandom(64 * 1024)
    store.push(
        reg,
        source=_checkpoint(tmp_path / "a", 1, weights),
        ref=reg.ref("m/c:1"),
        kind="checkpoint",
        lineage=Lineage(step=1, metrics={"val_loss": 3.0}, run_id="run-1"),
    )
    b = _checkpoint(tmp_path / "b", 2, weights)
    (b / "tokenizer.json").unlink()
    (b / "extra.md").write_text("notes")
    store.push(reg, source=b, ref=reg.ref("m/c:2"), kind="checkpoint", lineage=Lineage(step=2))
    listing = listing_mod.ls(reg, target="m/c")
    assert [t.tag for t in listing.tags] == ["1", "2"]
    assert {t.kind for t in listing.tags} == {"checkpoint"}
    info = show(reg, ref=reg.ref("m/c:1"))
    assert info.kind == "checkpoint"
    assert info.lineage["step"] == 1 and info.lineage["metrics"] == {"val_loss": 3.0}
    assert {f.path for f in info.files} == {
        "model.safetensors",
        "tokenizer.json",
        "trainer_state.json",
        "scripts/run.sh",
    }
    weights_file = next(f for f in info.files if f.path == "model.safetensors")
    assert weights_file.media_type == "application/vnd.cncf.model.weight.v1.raw"
    assert weights_file.digest == "sha256:" + hashlib.sha256(weights).hexdigest()
    change = diff(reg, a=reg.ref("m/c:1"), b=reg.ref("m/c:2"))
    assert [c.path for c in change.added] == ["extra.md"]
    assert [c.path for c in change.removed] == ["tokenizer.json"]
    assert [c.path for c in change.modified] == ["trainer_state.json"]
    assert change.unchanged == 2
    assert listing_mod.ls(reg, target=None).repositories == [target.ref("m/c")]


def test_tag_rm_and_missing(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    pushed = store.push(reg, source=_checkpoint(tmp_path / "a", 1), ref=reg.ref("m/c:1"), kind="checkpoint")
    store.tag(reg, src=reg.ref("m/c:1"), dst=reg.ref("m/c:best"))
    assert store.resolve(reg, ref=reg.ref("m/c:best")).manifest.digest == pushed.digest
    if target.scheme == "oci":
        # Distribution 2.8 deletes manifests, not tags: removing one of two tags is refused
        with pytest.raises(RemoteError, match="cannot remove tag 'best' alone"):
            removal.remove(reg, ref=reg.ref("m/c:best"))
        removal.remove(reg, ref=reg.ref(f"m/c@{pushed.digest}"))
        with pytest.raises(NotFoundError):
            store.resolve(reg, ref=reg.ref("m/c:best"))
        return
    removal.remove(reg, ref=reg.ref("m/c:best"))
    with pytest.raises(NotFoundError):
        store.resolve(reg, ref=reg.ref("m/c:best"))
    assert store.resolve(reg, ref=reg.ref("m/c:1")).manifest.digest == pushed.digest
    with pytest.raises(InputError):
        removal.remove(reg, ref=reg.ref("m/c"))


def test_copy_to_and_from_a_local_registry_keeps_digests(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    other = Registries(default_registry=f"file://{tmp_path / 'elsewhere'}")
    local = other.ref("team/model:v1")
    pushed = store.push(other, source=_checkpoint(tmp_path / "a", 1), ref=local, kind="model")
    out = store.copy(reg, src=local, dst=reg.ref("copied/model"))
    assert out.digest == pushed.digest
    assert store.resolve(reg, ref=reg.ref("copied/model:v1")).manifest.digest == pushed.digest
    back = store.copy(reg, src=reg.ref("copied/model:v1"), dst=other.ref("back/model:v1"))
    assert back.digest == pushed.digest
    again = store.copy(reg, src=local, dst=reg.ref("copied/model:v1"))
    assert again.blobs_copied == 0 and again.blobs_skipped >= 5
    pulled = pulling.pull(reg, ref=reg.ref("copied/model:v1"), dest=tmp_path / "pulled")
    assert pulled.digest == pushed.digest
    assert filecmp.cmp(tmp_path / "a/model.safetensors", tmp_path / "pulled/model.safetensors", shallow=False)


def test_lineage_up_and_down_with_an_eval_record(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    first = store.push(
        reg, source=_checkpoint(tmp_path / "a", 1), ref=reg.ref("m/ckpt:1"), kind="checkpoint", lineage=Lineage(step=1)
    )
    parents = pin_parents(reg, [("m/ckpt:1", "resumed-from")])
    second = store.push(
        reg,
        source=_checkpoint(tmp_path / "b", 2),
        ref=reg.ref("m/ckpt:2"),
        kind="checkpoint",
        lineage=Lineage(step=2, parents=parents),
    )
    model_parents = pin_parents(reg, [("m/ckpt:2", "derived-from")])
    model = store.push(
        reg,
        source=tmp_path / "b/model.safetensors",
        ref=reg.ref("m/model:v1"),
        kind="model",
        lineage=Lineage(parents=model_parents),
    )
    report = make_tree(tmp_path / "report", {"eval.json": b'{"val_loss": 1.9}'})
    subject = store.resolve(reg, ref=reg.ref("m/ckpt:2"))
    from trainops.registry.backends.base import Descriptor

    store.push(
        reg,
        source=report,
        ref=reg.ref("m/ckpt"),
        kind="eval",
        subject=Descriptor(subject.manifest.media_type, subject.manifest.digest, len(subject.manifest.data)),
    )
    up = lineage_graph(reg, ref=reg.ref("m/model:v1"), direction="up")
    assert {(e.child, e.parent, e.relation) for e in up.edges} == {
        (model.digest, second.digest, "derived-from"),
        (second.digest, first.digest, "resumed-from"),
    }
    down = lineage_graph(reg, ref=reg.ref("m/ckpt:1"), direction="down")
    assert {n.digest for n in down.nodes.values()} >= {first.digest, second.digest, model.digest}
    kinds = {n.kind for n in down.nodes.values()}
    assert kinds == {"checkpoint", "model", "eval"}
    text = to_tree(down)
    assert text.splitlines()[0].startswith("checkpoint ")
    assert "derived-into: model" in text and "described-by: eval" in text  # read walking down
    assert to_mermaid(up).startswith("graph BT") and "-->|derived-from|" in to_mermaid(up)
    assert to_dot(up).startswith("digraph lineage {") and to_dot(up).rstrip().endswith("}")


def test_gc_keeps_parents_and_reclaims_the_rest(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    old = store.push(reg, source=_checkpoint(tmp_path / "a", 1), ref=reg.ref("m/c:1"), kind="checkpoint")
    parents = pin_parents(reg, [("m/c:1", "resumed-from")])
    child = store.push(
        reg,
        source=_checkpoint(tmp_path / "b", 2),
        ref=reg.ref("m/c:2"),
        kind="checkpoint",
        lineage=Lineage(parents=parents),
    )
    stray = store.push(reg, source=_checkpoint(tmp_path / "c", 3), ref=reg.ref("m/c:3"), kind="checkpoint")
    newest = store.push(
        reg,
        source=_checkpoint(tmp_path / "d", 4),
        ref=reg.ref("m/c:4"),
        kind="checkpoint",
        lineage=Lineage(parents=pin_parents(reg, [("m/c:2", "resumed-from")])),
    )
    root = reg.root()
    kept_blobs = {f.digest for r in ("m/c:1", "m/c:2", "m/c:4") for f in show(reg, ref=reg.ref(r)).files}
    stray_only = {f.digest for f in show(reg, ref=reg.ref("m/c:3")).files} - kept_blobs
    plan = collect(reg, root=root, keep_last=1, dry_run=True)
    assert plan.removed_manifests == [f"{target.ref('m/c')}@{stray.digest}"]
    assert store.resolve(reg, ref=reg.ref("m/c:3")).manifest.digest == stray.digest  # dry run
    done = collect(reg, root=root, keep_last=1)
    assert done.removed_manifests == plan.removed_manifests
    for kept in (old, child, newest):
        assert store.resolve(reg, ref=reg.ref(f"m/c@{kept.digest}")).manifest.digest == kept.digest
    with pytest.raises(NotFoundError):
        store.resolve(reg, ref=reg.ref(f"m/c@{stray.digest}"))
    if target.scheme != "oci":  # the Distribution registry reclaims blobs with its own gc
        assert done.removed_blobs >= len(stray_only) >= 2  # weights and state (config if unique)
        assert done.bytes_freed >= 512 * 1024
    pulling.pull(reg, ref=reg.ref("m/c:2"), dest=tmp_path / "still-whole")


def test_concurrent_pushes_to_one_repository(target: Target, tmp_path: Path) -> None:
    reg = target.registries
    trees = [_checkpoint(tmp_path / f"t{i}", i) for i in range(6)]
    results: dict[int, str] = {}
    errors: list[str] = []  # each with its traceback, so that a failure says where

    def work(i: int) -> None:
        try:
            results[i] = store.push(reg, source=trees[i], ref=reg.ref(f"m/c:t{i}"), kind="checkpoint", jobs=2).digest
            store.push(reg, source=trees[i], ref=reg.ref("m/c:latest"), kind="checkpoint", jobs=2)
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors)
    latest = pulling.pull(reg, ref=reg.ref("m/c:latest"), dest=tmp_path / "latest")
    assert latest.digest in results.values()
    for i, digest in results.items():
        assert store.resolve(reg, ref=reg.ref(f"m/c:t{i}")).manifest.digest == digest


@pytest.mark.parametrize("target", ["file"], indirect=True)
def test_a_blob_another_writer_publishes_while_this_one_waits_for_its_partial(
    target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers of one blob into one file:// repository use the partial file named after
    its digest. The interleaving is forced at the backend's lock of that file: this writer
    has opened it, another writer (another backend, as another process's) then uploads the
    whole blob through the same file, renames it into blobs/ and lets go, and only then is
    it locked here. The upload succeeds (the blob is there, whole), the published blob is
    not written through, and no partial is left."""
    registries = target.registries
    ref = registries.ref("m/c")
    backend = registries.backend(ref)
    data = os.urandom(3000)
    (tmp_path / "blob").write_bytes(data)
    source = BlobSource(digest=sha256_digest(data), size=len(data), path=tmp_path / "blob")
    real_flock = fcntl.flock
    other: list[str] = []

    def flock(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_NB and not other:
            other.append(source.digest)
            with Registries(default_registry=target.url) as another:
                another.backend(ref).upload_blob(ref.repository, source)
        real_flock(fd, operation)

    shim = SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB, LOCK_UN=fcntl.LOCK_UN)
    monkeypatch.setattr(local, "fcntl", shim)
    backend.upload_blob(ref.repository, source)
    assert other == [source.digest]
    assert backend.blob_size(ref.repository, source.digest) == len(data)
    assert backend.read_range(ref.repository, source.digest, 0, len(data)) == data
    assert backend.stale_uploads(ref.repository, started_before=float("inf")) == []


def test_unchanged_repush_writes_no_manifest(target: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag that already names the very manifest a push would write has everything: the
    push writes no manifest (on file:// that was a rewrite of index.json, whose size grows
    with the tags), and the tag still names it. Content that differs is written and moves it."""
    src = _checkpoint(tmp_path / "ckpt", 7, weights=b"w" * 1024)
    reg = target.registries
    ref = reg.ref("same/ckpt:step-7")
    first = store.push(reg, source=src, ref=ref, kind="checkpoint")
    backend = reg.backend(ref)
    written: list[str | None] = []
    original = backend.put_manifest

    def put_manifest(repo: str, manifest: ManifestData, tag: str | None = None) -> None:
        written.append(tag)
        original(repo, manifest, tag=tag)

    monkeypatch.setattr(backend, "put_manifest", put_manifest)
    again = store.push(reg, source=src, ref=ref, kind="checkpoint")
    assert again.digest == first.digest and again.moved_from is None
    assert written == []
    assert backend.get_manifest(ref.repository, "step-7").digest == first.digest
    (src / "tokenizer.json").write_bytes(b'{"vocab": "abcd"}')
    changed = store.push(reg, source=src, ref=ref, kind="checkpoint")
    assert written == ["step-7"] and changed.moved_from == first.digest
    assert backend.get_manifest(ref.repository, "step-7").digest == changed.digest
