"""The backend contract: the same tests against file://, oci:// and s3://, on real servers.

Every backend must pass all of these unchanged (as dvc's remote tests do).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainops.errors import InputError, IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.backends import open_backend
from trainops.registry.backends.base import Backend, BlobSource, ManifestData, sha256_digest
from trainops.registry.reference import RegistryRoot


@dataclass
class Subject:
    """A backend under test, with a fresh repository name and a way to corrupt a stored blob."""

    backend: Backend
    repo: str
    tamper: Callable[[str, str, bytes], None]  # (repo, digest, new bytes)

    def other_repo(self, name: str) -> str:
        if self.backend.scheme == "file":
            return str(Path(self.repo).parent / name)
        return self.repo.rsplit("/", 1)[0] + "/" + name


def _file_subject(tmp_path: Path) -> Subject:
    root = RegistryRoot("file", "", str(tmp_path / "registry"))

    def tamper(repo: str, digest: str, data: bytes) -> None:
        blob = Path(repo) / "blobs" / "sha256" / digest.split(":")[1]
        os.chmod(blob, 0o644)
        blob.write_bytes(data)

    return Subject(open_backend(root), str(tmp_path / "registry" / "team" / "model"), tamper)


def _oci_subject(request: pytest.FixtureRequest) -> Subject:
    registry = request.getfixturevalue("registry")
    ns = f"contract-{uuid.uuid4().hex[:8]}"
    root = RegistryRoot("oci", registry.host, ns)

    def tamper(repo: str, digest: str, data: bytes) -> None:
        blob = Path(registry.data_dir) / "docker/registry/v2/blobs/sha256" / digest[7:9] / digest[7:] / "data"
        blob.write_bytes(data)

    return Subject(open_backend(root, insecure=True), f"{ns}/model", tamper)


def _s3_subject(request: pytest.FixtureRequest) -> Subject:
    bucket = request.getfixturevalue("s3_bucket")
    root = RegistryRoot("s3", bucket, "reg")
    backend = open_backend(root)

    def tamper(repo: str, digest: str, data: bytes) -> None:
        import boto3

        key = f"{repo}/blobs/sha256/{digest[7:]}"
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data)

    # Repositories are full paths from the bucket; the root's prefix only narrows listing.
    return Subject(backend, "reg/team/model", tamper)


@pytest.fixture(params=["file", "oci", "s3"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    scheme = request.param
    if scheme == "file":
        made = _file_subject(tmp_path)
    elif scheme == "oci":
        made = _oci_subject(request)
    else:
        made = _s3_subject(request)
    yield made
    made.backend.close()


def _blob(subject: Subject, tmp_path: Path, data: bytes) -> BlobSource:
    path = tmp_path / f"blob-{uuid.uuid4().hex}"
    path.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    subject.backend.upload_blob(subject.repo, BlobSource(digest=digest, size=len(data), path=path))
    return BlobSource(digest=digest, size=len(data), path=path)


def _manifest(config: BlobSource, layers: list[BlobSource], **extra: object) -> ManifestData:
    body: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "artifactType": media.ARTIFACT_TYPES["checkpoint"],
        "config": {"mediaType": media.CONFIG, "digest": config.digest, "size": config.size},
        "layers": [{"mediaType": media.WEIGHT_RAW, "digest": b.digest, "size": b.size} for b in layers],
        **extra,
    }
    data = json.dumps(body, sort_keys=True).encode()
    return ManifestData(data=data, media_type=media.OCI_MANIFEST, digest=sha256_digest(data))


def _push(sut: Subject, tmp_path: Path, payload: bytes, tag: str | None, **extra: object) -> ManifestData:
    config = _blob(sut, tmp_path, b'{"kind":"checkpoint"}')
    layer = _blob(sut, tmp_path, payload)
    manifest = _manifest(config, [layer], **extra)
    sut.backend.put_manifest(sut.repo, manifest, tag=tag)
    return manifest


def test_blob_round_trip_multi_chunk(subject: Subject, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    src = _blob(subject, tmp_path, data)
    assert subject.backend.blob_size(subject.repo, src.digest) == len(data)
    dest = tmp_path / "out"
    seen: list[int] = []
    subject.backend.download_blob(subject.repo, src.digest, dest, seen.append)
    assert dest.read_bytes() == data
    assert sum(seen) == len(data)
    with subject.backend.open_blob(subject.repo, src.digest) as fh:
        assert fh.read() == data


def test_missing_blob(subject: Subject, tmp_path: Path) -> None:
    _blob(subject, tmp_path, b"present")  # the repository exists
    missing = sha256_digest(b"absent")
    assert subject.backend.blob_size(subject.repo, missing) is None
    with pytest.raises(NotFoundError):
        subject.backend.download_blob(subject.repo, missing, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_upload_with_wrong_digest_leaves_nothing(subject: Subject, tmp_path: Path) -> None:
    path = tmp_path / "lying"
    path.write_bytes(b"these are not the bytes you hashed")
    wrong = sha256_digest(b"something else")
    with pytest.raises(IntegrityError):
        subject.backend.upload_blob(subject.repo, BlobSource(digest=wrong, size=path.stat().st_size, path=path))
    assert subject.backend.blob_size(subject.repo, wrong) is None


def test_upload_is_idempotent(subject: Subject, tmp_path: Path) -> None:
    src = _blob(subject, tmp_path, b"same bytes")
    subject.backend.upload_blob(subject.repo, src)
    assert subject.backend.blob_size(subject.repo, src.digest) == len(b"same bytes")


def test_tampered_blob_fails_verification(subject: Subject, tmp_path: Path) -> None:
    data = os.urandom(256 * 1024)
    src = _blob(subject, tmp_path, data)
    subject.tamper(subject.repo, src.digest, b"x" + data[1:])
    dest = tmp_path / "out"
    with pytest.raises(IntegrityError):
        subject.backend.download_blob(subject.repo, src.digest, dest)
    assert not dest.exists()


def test_manifest_by_tag_and_digest(subject: Subject, tmp_path: Path) -> None:
    manifest = _push(subject, tmp_path, b"weights-1", "v1")
    by_tag = subject.backend.get_manifest(subject.repo, "v1")
    by_digest = subject.backend.get_manifest(subject.repo, manifest.digest)
    for got in (by_tag, by_digest):
        assert got.data == manifest.data
        assert got.digest == manifest.digest
        assert got.media_type == media.OCI_MANIFEST
    assert subject.backend.list_tags(subject.repo) == ["v1"]
    assert manifest.digest in subject.backend.list_manifests(subject.repo)


def test_tag_moves_and_old_manifest_stays(subject: Subject, tmp_path: Path) -> None:
    first = _push(subject, tmp_path, b"weights-1", "latest")
    second = _push(subject, tmp_path, b"weights-2", "latest")
    assert subject.backend.get_manifest(subject.repo, "latest").digest == second.digest
    assert subject.backend.get_manifest(subject.repo, first.digest).data == first.data


def test_missing_tag_and_repository(subject: Subject, tmp_path: Path) -> None:
    _push(subject, tmp_path, b"w", "v1")
    with pytest.raises(NotFoundError):
        subject.backend.get_manifest(subject.repo, "nope")
    with pytest.raises(NotFoundError):
        subject.backend.list_tags(subject.other_repo("never-pushed"))


def test_delete_tag(subject: Subject, tmp_path: Path) -> None:
    _push(subject, tmp_path, b"w1", "keep")
    _push(subject, tmp_path, b"w2", "drop")
    subject.backend.delete_tag(subject.repo, "drop")
    assert subject.backend.list_tags(subject.repo) == ["keep"]
    with pytest.raises(NotFoundError):
        subject.backend.get_manifest(subject.repo, "drop")


def test_delete_manifest_removes_its_tags(subject: Subject, tmp_path: Path) -> None:
    keep = _push(subject, tmp_path, b"w1", "keep")
    gone = _push(subject, tmp_path, b"w2", "gone")
    subject.backend.delete_manifest(subject.repo, gone.digest)
    with pytest.raises(NotFoundError):
        subject.backend.get_manifest(subject.repo, gone.digest)
    assert subject.backend.list_tags(subject.repo) == ["keep"]
    assert subject.backend.get_manifest(subject.repo, "keep").digest == keep.digest


def test_list_repositories(subject: Subject, tmp_path: Path) -> None:
    _push(subject, tmp_path, b"w", "v1")
    assert subject.repo in subject.backend.list_repositories()


def test_referrers(subject: Subject, tmp_path: Path) -> None:
    target = _push(subject, tmp_path, b"checkpoint", "ckpt")
    assert subject.backend.referrers(subject.repo, target.digest) == []
    subject_field = {"mediaType": media.OCI_MANIFEST, "digest": target.digest, "size": len(target.data)}
    report = _push(
        subject,
        tmp_path,
        b"eval report",
        None,
        subject=subject_field,
        annotations={"dev.trainops.kind": "eval"},
    )
    found = subject.backend.referrers(subject.repo, target.digest)
    assert [d.digest for d in found] == [report.digest]
    assert found[0].artifact_type == media.ARTIFACT_TYPES["checkpoint"]
    assert found[0].annotations.get("dev.trainops.kind") == "eval"


def test_mount_blob_between_repositories(subject: Subject, tmp_path: Path) -> None:
    src = _blob(subject, tmp_path, b"shared weights")
    other = subject.other_repo("other")
    if subject.backend.mount_blob(other, src.digest, subject.repo):
        assert subject.backend.blob_size(other, src.digest) == src.size
    else:
        assert subject.backend.blob_size(other, src.digest) is None


def test_concurrent_tag_moves_end_on_a_complete_manifest(subject: Subject, tmp_path: Path) -> None:
    _push(subject, tmp_path, b"seed", "hot")
    written: list[ManifestData] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        try:
            manifest = _push(subject, tmp_path, f"weights-{i}".encode(), "hot")
            with lock:
                written.append(manifest)
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    final = subject.backend.get_manifest(subject.repo, "hot")
    assert final.digest in {m.digest for m in written}
    body = json.loads(final.data)
    for layer in body["layers"]:
        assert subject.backend.blob_size(subject.repo, layer["digest"]) == layer["size"]


def test_list_and_delete_blobs_where_supported(subject: Subject, tmp_path: Path) -> None:
    src = _blob(subject, tmp_path, b"to delete")
    listed = subject.backend.list_blobs(subject.repo)
    if listed is not None:
        assert src.digest in listed
    subject.backend.delete_blob(subject.repo, src.digest)
    assert subject.backend.blob_size(subject.repo, src.digest) is None


def test_read_range_reads_a_part_without_the_rest(
    subject: Subject, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    src = _blob(subject, tmp_path, data)
    read = subject.backend.read_range
    with caplog.at_level("WARNING"):
        assert read(subject.repo, src.digest, 0, 8) == data[:8]
        assert read(subject.repo, src.digest, 1_500_001, 70_000) == data[1_500_001:1_570_001]
        assert read(subject.repo, src.digest, len(data) - 5, 100) == data[-5:]  # clipped at the end
        assert read(subject.repo, src.digest, len(data), 10) == b""  # past the end
        assert read(subject.repo, src.digest, 7, 0) == b""
    assert not [r for r in caplog.records if "ignores HTTP Range" in r.getMessage()]  # served as ranges
    with pytest.raises(NotFoundError):
        read(subject.repo, sha256_digest(b"absent"), 0, 8)
    with pytest.raises(ValueError):
        read(subject.repo, src.digest, -1, 8)


# -- leases and the gc lock (trainops/registry/retention/lease.py) ----------------------------------


def _lease_subject(subject: Subject) -> Subject:
    if subject.backend.scheme == "oci":  # the registry's own garbage collector owns its blobs
        assert subject.backend.take_gc_lock(subject.repo, "gc a", stale_before=0.0)
        subject.backend.put_lease(subject.repo, uuid.uuid4().hex, "push")
        assert subject.backend.list_leases(subject.repo) == [] and subject.backend.gc_lock(subject.repo) is None
        pytest.skip("oci:// keeps no leases: gc deletes no blob there")
    return subject


def test_leases_are_listed_touched_and_dropped(subject: Subject, tmp_path: Path) -> None:
    sut = _lease_subject(subject)
    manifest = _push(sut, tmp_path, b"leased", "v1")
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    sut.backend.put_lease(sut.repo, first, "push one")
    sut.backend.put_lease(sut.repo, second, "push two")
    listed = {lease.name: lease for lease in sut.backend.list_leases(sut.repo)}
    assert set(listed) == {first, second}
    assert all(abs(lease.touched - time.time()) < 60 for lease in listed.values())
    # markers, not content: no blob, manifest, tag or repository more than before
    assert sut.backend.list_manifests(sut.repo) == [manifest.digest]
    assert sut.backend.list_tags(sut.repo) == ["v1"]
    assert sut.backend.list_repositories() == [sut.repo]
    blobs = sut.backend.list_blobs(sut.repo)
    assert blobs is not None and len(blobs) == (3 if sut.backend.scheme == "file" else 2)
    sut.backend.drop_lease(sut.repo, first)
    sut.backend.drop_lease(sut.repo, first)  # already gone: not an error
    assert [lease.name for lease in sut.backend.list_leases(sut.repo)] == [second]
    with pytest.raises(InputError):
        sut.backend.put_lease(sut.repo, "../escape", "push")


def test_gc_lock_is_exclusive_and_only_its_owner_releases_it(subject: Subject, tmp_path: Path) -> None:
    sut = _lease_subject(subject)
    _push(sut, tmp_path, b"locked", "v1")
    backend, repo = sut.backend, sut.repo
    assert backend.gc_lock(repo) is None
    assert backend.take_gc_lock(repo, "gc a", stale_before=time.time() - 60)
    assert not backend.take_gc_lock(repo, "gc b", stale_before=time.time() - 60)
    held = backend.gc_lock(repo)
    assert held is not None and held.owner == "gc a"
    assert backend.refresh_gc_lock(repo, "gc a") and not backend.refresh_gc_lock(repo, "gc b")
    backend.release_gc_lock(repo, "gc b")  # not b's: stays
    assert backend.gc_lock(repo) is not None
    backend.release_gc_lock(repo, "gc a")
    assert backend.gc_lock(repo) is None
    assert backend.take_gc_lock(repo, "gc b", stale_before=time.time() - 60)


def test_a_dead_gcs_lock_is_taken_over_once(subject: Subject, tmp_path: Path) -> None:
    sut = _lease_subject(subject)
    _push(sut, tmp_path, b"stale lock", "v1")
    backend, repo = sut.backend, sut.repo
    assert backend.take_gc_lock(repo, "gc dead", stale_before=0.0)
    # everything touched before a moment from now counts as stale: the dead gc's lock is
    later = time.time() + 5
    wins: list[str] = []

    def contender(name: str) -> None:
        if backend.take_gc_lock(repo, name, stale_before=later - 10 if name != "first" else later):
            wins.append(name)

    contender("first")
    assert wins == ["first"]
    threads = [threading.Thread(target=contender, args=(f"gc {i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins == ["first"]  # the live lock is fresh for everyone else
    assert not backend.refresh_gc_lock(repo, "gc dead")  # the dead gc lost it
    held = backend.gc_lock(repo)
    assert held is not None and held.owner == "first"


def test_concurrent_gc_locks_one_winner(subject: Subject, tmp_path: Path) -> None:
    sut = _lease_subject(subject)
    _push(sut, tmp_path, b"race", "v1")
    wins: list[int] = []
    start = threading.Barrier(8)

    def contender(i: int) -> None:
        start.wait(timeout=30)
        if sut.backend.take_gc_lock(sut.repo, f"gc {i}", stale_before=time.time() - 60):
            wins.append(i)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    held = sut.backend.gc_lock(sut.repo)
    assert held is not None and held.owner == f"gc {wins[0]}"
