"""The s3:// tag index on a real moto server: what `registry ls` reads instead of listing
every tag object, and that it never loses or misreports a tag: a missing or partial index,
a writer killed mid-write (its pending marker left behind), tags changed behind trainops'
back, deleted tags and manifests, and concurrent writers and builders.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.registry import media
from trainops.registry.backends.base import BlobSource, ManifestData, sha256_digest
from trainops.registry.backends.s3 import S3Backend
from trainops.registry.backends.s3.tags import SHARDS, shard_of
from trainops.registry.reference import RegistryRoot

REPO = "reg/team/model"


@pytest.fixture
def backend(s3_bucket: str) -> Iterator[S3Backend]:
    made = S3Backend(RegistryRoot("s3", s3_bucket, "reg"), max_concurrency=4)
    yield made
    made.close()


@pytest.fixture
def raw(s3_server: Any, s3_bucket: str) -> Any:
    return s3_server.client()


def _manifest(backend: S3Backend, tmp_path: Path, n: int) -> ManifestData:
    """A distinct manifest (its one layer uploaded) per n."""
    data = f"layer {n}".encode()
    path = tmp_path / f"layer-{n}-{uuid.uuid4().hex[:6]}"
    path.write_bytes(data)
    layer = BlobSource(digest=sha256_digest(data), size=len(data), path=path)
    backend.upload_blob(REPO, layer)
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": {"mediaType": media.OCI_EMPTY, "digest": sha256_digest(b"{}"), "size": 2},
        "layers": [{"mediaType": media.WEIGHT_RAW, "digest": layer.digest, "size": layer.size}],
    }
    encoded = json.dumps(body, sort_keys=True).encode()
    return ManifestData(data=encoded, media_type=media.OCI_MANIFEST, digest=sha256_digest(encoded))


def _truth(raw: Any, bucket: str) -> dict[str, str]:
    """Every tag object of REPO and the digest it names, read past the backend."""
    found: dict[str, str] = {}
    for page in raw.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{REPO}/tags/"):
        for obj in page.get("Contents") or []:
            body = raw.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            found[obj["Key"].rsplit("/", 1)[1]] = json.loads(body)["digest"]
    return found


def _keys(raw: Any, bucket: str, prefix: str) -> list[str]:
    return [o["Key"] for o in raw.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents") or []]


def _drop_index(raw: Any, bucket: str) -> None:
    for key in _keys(raw, bucket, f"{REPO}/_tags/"):
        raw.delete_object(Bucket=bucket, Key=key)


class Requests:
    """The S3 operations the backend's client sends (a botocore hook; the server is real)."""

    def __init__(self, backend: S3Backend) -> None:
        self.ops: list[str] = []
        backend.client.meta.events.register("before-parameter-build.s3", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)


def test_listing_reads_the_index_not_every_tag(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    manifests = [_manifest(backend, tmp_path, i) for i in range(3)]
    tags = [f"step-{i}" for i in range(40)]
    for i, tag in enumerate(tags):
        backend.put_manifest(REPO, manifests[i % 3], tag=tag)
    assert _keys(raw, s3_bucket, f"{REPO}/_tags/pending/") == []  # every write finished its marker
    seen = Requests(backend)
    assert backend.list_tags(REPO) == sorted(tags)
    assert sorted(seen.ops) == ["GetObject"] * SHARDS + ["ListObjectsV2"]  # the pending LIST, the shards
    assert backend.tag_targets(REPO) == _truth(raw, s3_bucket)


def test_a_repository_without_index_is_listed_then_indexed_by_the_next_write(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    one, two = _manifest(backend, tmp_path, 1), _manifest(backend, tmp_path, 2)
    for tag in ("a", "b", "c"):
        backend.put_manifest(REPO, one, tag=tag)
    _drop_index(raw, s3_bucket)  # as written before the index existed
    assert backend.list_tags(REPO) == ["a", "b", "c"]
    assert backend.tag_targets(REPO) is None  # callers read each tag instead
    backend.put_manifest(REPO, two, tag="d")  # builds the index from the listing
    shards = {0, *(shard_of(t) for t in "abcd")}  # 00 always (a build creates it last), else non-empty ones
    assert sorted(_keys(raw, s3_bucket, f"{REPO}/_tags/")) == [f"{REPO}/_tags/{i:02x}.json" for i in sorted(shards)]
    assert backend.list_tags(REPO) == ["a", "b", "c", "d"]
    assert backend.tag_targets(REPO) is None  # a, b, c known by name only
    for tag in ("a", "b", "c"):
        backend.put_manifest(REPO, two, tag=tag)
    assert backend.tag_targets(REPO) == {t: two.digest for t in "abcd"}


def test_without_shard_00_the_index_is_not_trusted(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    manifest = _manifest(backend, tmp_path, 1)
    tags = [f"t{i}" for i in range(20)]
    for tag in tags:
        backend.put_manifest(REPO, manifest, tag=tag)
    raw.delete_object(Bucket=s3_bucket, Key=f"{REPO}/_tags/00.json")  # a build cut short before its end
    assert backend.list_tags(REPO) == sorted(tags)
    assert backend.tag_targets(REPO) is None
    late = next(f"u{i}" for i in range(100) if shard_of(f"u{i}") == 0)
    backend.put_manifest(REPO, manifest, tag=late)  # rebuilds from the listing (digests then unknown)
    assert backend.list_tags(REPO) == sorted([*tags, late])


def test_an_absent_shard_is_an_empty_one(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    manifest = _manifest(backend, tmp_path, 1)
    backend.put_manifest(REPO, manifest, tag="first")
    other = next(f"t{i}" for i in range(100) if shard_of(f"t{i}") not in (0, shard_of("first")))
    key = f"{REPO}/_tags/{shard_of(other):02x}.json"
    assert key not in _keys(raw, s3_bucket, f"{REPO}/_tags/")
    assert backend.tag_targets(REPO) == {"first": manifest.digest}
    backend.put_manifest(REPO, manifest, tag=other)  # its first writer creates the shard
    assert key in _keys(raw, s3_bucket, f"{REPO}/_tags/")
    assert backend.tag_targets(REPO) == {"first": manifest.digest, other: manifest.digest}


def test_a_killed_writer_leaves_a_marker_readers_and_gc_honour(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    one, two = _manifest(backend, tmp_path, 1), _manifest(backend, tmp_path, 2)
    backend.put_manifest(REPO, one, tag="moved")
    backend.put_manifest(REPO, one, tag="kept")
    backend.put_manifest(REPO, two, tag="gone")
    # What a writer killed between its tag write and its index sync leaves: the marker, and
    # the tag objects changed (one moved, one created, one deleted) with the shards untouched.
    for tag in ("moved", "new", "gone"):
        raw.put_object(Bucket=s3_bucket, Key=f"{REPO}/_tags/pending/{tag}/{uuid.uuid4().hex}", Body=b"")
    descriptor = json.dumps({"mediaType": two.media_type, "digest": two.digest, "size": len(two.data)})
    raw.put_object(Bucket=s3_bucket, Key=f"{REPO}/tags/moved", Body=descriptor.encode())
    raw.put_object(Bucket=s3_bucket, Key=f"{REPO}/tags/new", Body=descriptor.encode())
    raw.delete_object(Bucket=s3_bucket, Key=f"{REPO}/tags/gone")
    expected = {"kept": one.digest, "moved": two.digest, "new": two.digest}
    assert backend.list_tags(REPO) == sorted(expected)
    assert backend.tag_targets(REPO) == expected == _truth(raw, s3_bucket)

    assert backend.stale_uploads(REPO, started_before=time.time() - 3600) == []  # too recent for gc
    stale = backend.stale_uploads(REPO, started_before=time.time() + 60)
    assert sorted(u.name.split("/")[-2] for u in stale) == ["gone", "moved", "new"]
    for upload in stale:
        backend.remove_stale_upload(REPO, upload)
    assert _keys(raw, s3_bucket, f"{REPO}/_tags/pending/") == []
    assert backend.tag_targets(REPO) == expected  # now from the shards alone


def test_deleting_tags_and_manifests_updates_the_index(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    one, two = _manifest(backend, tmp_path, 1), _manifest(backend, tmp_path, 2)
    for tag in ("a", "b"):
        backend.put_manifest(REPO, one, tag=tag)
    for tag in ("c", "d"):
        backend.put_manifest(REPO, two, tag=tag)
    backend.delete_tag(REPO, "c")
    assert backend.tag_targets(REPO) == {"a": one.digest, "b": one.digest, "d": two.digest}
    backend.delete_manifest(REPO, one.digest)
    assert backend.list_tags(REPO) == ["d"]
    assert backend.tag_targets(REPO) == {"d": two.digest} == _truth(raw, s3_bucket)
    assert _keys(raw, s3_bucket, f"{REPO}/_tags/pending/") == []


def test_concurrent_writers_never_lose_a_tag(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    """8 writers: each creates its own tags and moves two shared ones; a reader checks, all
    along, that every tag whose write had returned before its read started is listed."""
    manifests = [_manifest(backend, tmp_path, i) for i in range(4)]
    backend.put_manifest(REPO, manifests[0], tag="seed")
    _drop_index(raw, s3_bucket)  # the writers also race to build the index
    done: set[str] = {"seed"}
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            for i in range(12):
                own = f"w{w}-{i}"
                backend.put_manifest(REPO, manifests[(w + i) % 4], tag=own)
                backend.put_manifest(REPO, manifests[(w * i) % 4], tag=f"hot{i % 2}")
                with lock:
                    done.update({own, f"hot{i % 2}"})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                with lock:
                    before = set(done)
                listed = set(backend.list_tags(REPO))
                assert before <= listed, f"lost: {sorted(before - listed)}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert not errors, errors[0]
    truth = _truth(raw, s3_bucket)
    assert len(truth) == 1 + 8 * 12 + 2
    assert backend.list_tags(REPO) == sorted(truth)
    assert _keys(raw, s3_bucket, f"{REPO}/_tags/pending/") == []
    merged: dict[str, str | None] = {}
    for shard in range(SHARDS):
        body = raw.get_object(Bucket=s3_bucket, Key=f"{REPO}/_tags/{shard:02x}.json")["Body"].read()
        merged.update(json.loads(body)["tags"])
    assert merged == {**truth, "seed": None}  # seed is known by name only (indexed by a build)


def test_a_new_repository_is_indexed_without_listing(backend: S3Backend, tmp_path: Path) -> None:
    manifest = _manifest(backend, tmp_path, 1)  # its blob upload creates the repository
    seen = Requests(backend)
    backend.put_manifest(REPO, manifest, tag="v1")
    assert "ListObjectsV2" not in seen.ops
    assert seen.ops.count("PutObject") == 5  # manifest, tag marker, shard 00 (the build), tag, its shard
    assert backend.tag_targets(REPO) == {"v1": manifest.digest}


def test_a_re_push_writes_no_marker(backend: S3Backend, tmp_path: Path) -> None:
    manifest = _manifest(backend, tmp_path, 1)
    backend.put_manifest(REPO, manifest, tag="v1")
    seen = Requests(backend)
    backend.put_manifest(REPO, manifest, tag="v1")
    assert seen.ops.count("PutObject") == 1  # the manifest (idempotent); the tag already names it
    assert "DeleteObject" not in seen.ops
