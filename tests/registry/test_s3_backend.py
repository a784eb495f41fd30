"""The s3:// backend on a real moto server: layout, verified multipart uploads, resume after a
crash, tampering, conditional tag writes under contention, referrers, pagination, errors.

(The backend contract suite runs the same behaviour checks as for every backend; these are
the S3-specific ones.) Sizes are megabytes: moto is slow for big objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.errors import InputError, IntegrityError, NotFoundError, RemoteError
from trainops.registry import media
from trainops.registry.backends.base import BlobSource, ManifestData, sha256_digest
from trainops.registry.backends.s3 import MIN_PART_SIZE, S3Backend
from trainops.registry.backends.s3.tags import shard_of
from trainops.registry.backends.s3.transfer import MAX_PARTS, MiB, part_size_for
from trainops.registry.reference import RegistryRoot
from trainops_testing import planted
from trainops_testing.services import MotoS3, free_port
from trainops_testing.tcp_proxy import TcpProxy

REPO = "reg/team/model"
PART = MIN_PART_SIZE  # 5 MiB, the smallest part S3 (and moto) accepts


# -- helpers ---------------------------------------------------------------------------------


class Calls:
    """Counts the S3 operations a backend's own client sends, and the UploadPart bytes.

    A botocore event hook on the real client: the requests still go to the real server.
    """

    def __init__(self, backend: S3Backend) -> None:
        self.ops: dict[str, int] = {}
        self.part_bytes = 0
        self.part_numbers: list[int] = []
        self._lock = threading.Lock()
        backend.client.meta.events.register("before-parameter-build.s3", self._seen)

    def _seen(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.ops[model.name] = self.ops.get(model.name, 0) + 1
            if model.name == "UploadPart":
                body = params["Body"]  # bytearray, or BytesIO once botocore wrapped bytes
                if isinstance(body, (bytes, bytearray)):
                    self.part_bytes += len(body)
                else:
                    with body.getbuffer() as view:
                        self.part_bytes += view.nbytes
                self.part_numbers.append(int(params["PartNumber"]))

    def count(self, op: str) -> int:
        return self.ops.get(op, 0)


@pytest.fixture
def backend(s3_bucket: str) -> Iterator[S3Backend]:
    made = S3Backend(RegistryRoot("s3", s3_bucket, "reg"), part_size=PART, max_concurrency=4)
    yield made
    made.close()


@pytest.fixture
def raw(s3_server: MotoS3, s3_bucket: str) -> Any:
    """A plain boto3 client on the same server: to look at and tamper with what is stored."""
    return s3_server.client()


def _file(tmp_path: Path, data: bytes) -> BlobSource:
    path = tmp_path / f"blob-{uuid.uuid4().hex[:8]}"
    path.write_bytes(data)
    return BlobSource(digest=sha256_digest(data), size=len(data), path=path)


def _pending(raw: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    uploads = raw.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads") or []
    return [u for u in uploads if u["Key"] == key]


def _parts(raw: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    (upload,) = _pending(raw, bucket, key)
    return list(raw.list_parts(Bucket=bucket, Key=key, UploadId=upload["UploadId"]).get("Parts") or [])


def _blob_key(digest: str, repo: str = REPO) -> str:
    return f"{repo}/blobs/sha256/{digest[7:]}"


def _manifest(layers: list[BlobSource], **extra: object) -> ManifestData:
    body: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "artifactType": media.ARTIFACT_TYPES["checkpoint"],
        "config": {"mediaType": media.OCI_EMPTY, "digest": sha256_digest(b"{}"), "size": 2},
        "layers": [{"mediaType": media.WEIGHT_RAW, "digest": b.digest, "size": b.size} for b in layers],
        **extra,
    }
    data = json.dumps(body, sort_keys=True).encode()
    return ManifestData(data=data, media_type=media.OCI_MANIFEST, digest=sha256_digest(data))


def _push(backend: S3Backend, tmp_path: Path, payload: bytes, tag: str | None, **extra: object) -> ManifestData:
    layer = _file(tmp_path, payload)
    backend.upload_blob(REPO, layer)
    manifest = _manifest([layer], **extra)
    backend.put_manifest(REPO, manifest, tag=tag)
    return manifest


class Interrupt(Exception):
    """Raised by a progress callback to stop an upload part-way."""


def _stop_after(parts: int) -> Callable[[int], None]:
    seen = [0]

    def progress(_n: int) -> None:
        seen[0] += 1
        if seen[0] >= parts:
            raise Interrupt

    return progress


# -- blobs -----------------------------------------------------------------------------------


def test_small_blob_is_one_put_and_round_trips(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(PART - 1)
    src = _file(tmp_path, data)
    calls = Calls(backend)
    seen: list[int] = []
    backend.upload_blob(REPO, src, seen.append)
    assert sum(seen) == len(data)
    assert calls.count("PutObject") >= 1 and calls.count("CreateMultipartUpload") == 0
    head = raw.head_object(Bucket=s3_bucket, Key=_blob_key(src.digest))
    assert head["ContentLength"] == len(data) and "-" not in head["ETag"]
    assert backend.blob_size(REPO, src.digest) == len(data)
    dest = tmp_path / "out"
    backend.download_blob(REPO, src.digest, dest)
    assert dest.read_bytes() == data
    with backend.open_blob(REPO, src.digest) as fh:
        assert fh.read() == data


@pytest.mark.parametrize("download_concurrency", [1, 3])
def test_multipart_blob_round_trips(s3_bucket: str, raw: Any, tmp_path: Path, download_concurrency: int) -> None:
    backend = S3Backend(
        RegistryRoot("s3", s3_bucket, "reg"),
        part_size=PART,
        max_concurrency=3,
        download_concurrency=download_concurrency,
    )
    data = os.urandom(3 * PART + 12345)  # three full parts and a short last one
    src = _file(tmp_path, data)
    calls = Calls(backend)
    seen: list[int] = []
    backend.upload_blob(REPO, src, seen.append)
    assert sum(seen) == len(data)
    assert calls.count("CreateMultipartUpload") == 1 and calls.count("CompleteMultipartUpload") == 1
    assert sorted(calls.part_numbers) == [1, 2, 3, 4] and calls.part_bytes == len(data)
    head = raw.head_object(Bucket=s3_bucket, Key=_blob_key(src.digest))
    assert head["ETag"].strip('"').endswith("-4")  # S3 assembled it from our four parts
    assert _pending(raw, s3_bucket, _blob_key(src.digest)) == []
    dest = tmp_path / "out"
    got: list[int] = []
    backend.download_blob(REPO, src.digest, dest, got.append)
    assert sum(got) == len(data)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == src.digest[7:]
    backend.close()


def test_stream_source_without_a_path(backend: S3Backend, tmp_path: Path) -> None:
    import io

    data = os.urandom(2 * PART + 7)
    src = BlobSource(digest=sha256_digest(data), size=len(data), opener=lambda: io.BytesIO(data))
    backend.upload_blob(REPO, src)
    dest = tmp_path / "out"
    backend.download_blob(REPO, src.digest, dest)
    assert dest.read_bytes() == data


@pytest.mark.parametrize("size", [1000, 2 * PART + 1], ids=["single-put", "multipart"])
def test_lying_source_leaves_no_object_and_no_pending_upload(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path, size: int
) -> None:
    path = tmp_path / "lying"
    path.write_bytes(os.urandom(size))
    wrong = sha256_digest(b"not these bytes")
    with pytest.raises(IntegrityError, match="hashes to"):
        backend.upload_blob(REPO, BlobSource(digest=wrong, size=size, path=path))
    key = _blob_key(wrong)
    assert "Contents" not in raw.list_objects_v2(Bucket=s3_bucket, Prefix=key)
    assert _pending(raw, s3_bucket, key) == []
    assert backend.blob_size(REPO, wrong) is None


def test_source_shorter_than_its_size_is_refused(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(2 * PART)
    src = _file(tmp_path, data)
    claimed = BlobSource(digest=src.digest, size=len(data) + PART, path=src.path)
    with pytest.raises(IntegrityError, match="bytes, expected"):
        backend.upload_blob(REPO, claimed)
    assert _pending(raw, s3_bucket, _blob_key(src.digest)) == []
    assert backend.blob_size(REPO, src.digest) is None


def test_interrupted_upload_resumes_sending_only_missing_parts(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(6 * PART + 99)  # 7 parts
    src = _file(tmp_path, data)
    key = _blob_key(src.digest)
    with pytest.raises(Interrupt):
        backend.upload_blob(REPO, src, _stop_after(2))
    assert backend.blob_size(REPO, src.digest) is None  # nothing visible yet
    kept = _parts(raw, s3_bucket, key)
    assert 2 <= len(kept) < 7
    calls = Calls(backend)
    seen: list[int] = []
    backend.upload_blob(REPO, src, seen.append)
    assert calls.part_bytes == len(data) - sum(p["Size"] for p in kept)
    assert not set(calls.part_numbers) & {p["PartNumber"] for p in kept}
    assert sum(seen) == len(data)  # kept parts count as done for progress bars
    assert calls.count("CreateMultipartUpload") == 0
    assert _pending(raw, s3_bucket, key) == []
    dest = tmp_path / "out"
    backend.download_blob(REPO, src.digest, dest)
    assert dest.read_bytes() == data


def test_resume_resends_a_kept_part_whose_bytes_differ(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(4 * PART)
    src = _file(tmp_path, data)
    key = _blob_key(src.digest)
    with pytest.raises(Interrupt):
        backend.upload_blob(REPO, src, _stop_after(2))
    (upload,) = _pending(raw, s3_bucket, key)
    numbers = {p["PartNumber"] for p in _parts(raw, s3_bucket, key)}
    assert 1 in numbers
    raw.upload_part(
        Bucket=s3_bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"\0" * PART
    )  # same size, other bytes
    calls = Calls(backend)
    backend.upload_blob(REPO, src)
    assert 1 in calls.part_numbers
    assert calls.part_bytes == (4 - len(numbers) + 1) * PART
    dest = tmp_path / "out"
    backend.download_blob(REPO, src.digest, dest)
    assert dest.read_bytes() == data


_CHILD = """
import sys, threading
from pathlib import Path
from trainops.registry.backends.base import BlobSource
from trainops.registry.backends.s3 import S3Backend
from trainops.registry.reference import RegistryRoot
bucket, repo, path, digest, size, part, stop_after = sys.argv[1:8]
backend = S3Backend(RegistryRoot("s3", bucket, ""), part_size=int(part), max_concurrency=2)
seen = [0]
def progress(n):
    seen[0] += 1
    if seen[0] == int(stop_after):
        print("parts-done", flush=True)
        threading.Event().wait()  # hang here until the test kills the process
backend.upload_blob(repo, BlobSource(digest, int(size), path=Path(path)), progress)
print("finished", flush=True)
"""


def test_upload_killed_with_sigkill_resumes(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(8 * PART)
    src = _file(tmp_path, data)
    key = _blob_key(src.digest)
    args = [s3_bucket, REPO, str(src.path), src.digest, str(src.size), str(PART), "3"]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)  # waits for the child's line
        line = child.stdout.readline().decode().strip() if ready else ""
        assert line == "parts-done", child.stderr.read().decode() if child.stderr else line
        assert len(_parts(raw, s3_bucket, key)) >= 3
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    kept = _parts(raw, s3_bucket, key)
    assert 3 <= len(kept) < 8
    assert backend.blob_size(REPO, src.digest) is None
    calls = Calls(backend)
    backend.upload_blob(REPO, src)
    assert calls.part_bytes == len(data) - sum(p["Size"] for p in kept)
    dest = tmp_path / "out"
    backend.download_blob(REPO, src.digest, dest)
    assert dest.read_bytes() == data
    assert _pending(raw, s3_bucket, key) == []


@pytest.mark.parametrize("download_concurrency", [1, 2])
def test_tampered_blob_fails_download_and_dest_is_removed(
    s3_bucket: str, raw: Any, tmp_path: Path, download_concurrency: int
) -> None:
    backend = S3Backend(
        RegistryRoot("s3", s3_bucket, "reg"),
        part_size=PART,
        download_concurrency=download_concurrency,
    )
    data = os.urandom(2 * PART + 5)
    src = _file(tmp_path, data)
    backend.upload_blob(REPO, src)
    raw.put_object(Bucket=s3_bucket, Key=_blob_key(src.digest), Body=b"x" + data[1:])
    dest = tmp_path / "out"
    with pytest.raises(IntegrityError, match="tampered"):
        backend.download_blob(REPO, src.digest, dest)
    assert not dest.exists()
    raw.put_object(Bucket=s3_bucket, Key=_blob_key(src.digest), Body=data[:-1])  # truncated
    with pytest.raises(IntegrityError):
        backend.download_blob(REPO, src.digest, dest)
    assert not dest.exists()
    backend.close()


@pytest.mark.parametrize("download_concurrency", [1, 2], ids=["stream", "ranges"])
def test_download_survives_a_dropped_connection(
    backend: S3Backend,
    s3_server: MotoS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    download_concurrency: int,
) -> None:
    data = os.urandom(3 * PART)
    src = _file(tmp_path, data)
    backend.upload_blob(REPO, src)
    proxy = TcpProxy(s3_server.endpoint_url, cut_after=PART // 2)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    reader = S3Backend(
        RegistryRoot("s3", backend.bucket, "reg"),
        part_size=PART,
        download_concurrency=download_concurrency,
    )
    ranges: list[str] = []
    reader.client.meta.events.register(
        "before-parameter-build.s3.GetObject",
        lambda params, **_: ranges.append(str(params.get("Range", ""))),
    )
    dest = tmp_path / "out"
    seen: list[int] = []
    try:
        reader.download_blob(REPO, src.digest, dest, seen.append)
    finally:
        reader.close()
        proxy.close()
    assert proxy.cuts == 1
    assert dest.read_bytes() == data
    assert sum(seen) == len(data)
    if download_concurrency == 1:  # the second GET continues where the first one broke off
        assert len(ranges) == 2 and ranges[0] == ""
        assert ranges[1].startswith("bytes=") and ranges[1] != "bytes=0-"
    else:  # the broken range is fetched again
        assert len(ranges) == 4 and len(set(ranges)) == 3


def test_mount_is_a_server_side_copy(backend: S3Backend, tmp_path: Path) -> None:
    src = _file(tmp_path, os.urandom(1000))
    backend.upload_blob(REPO, src)
    calls = Calls(backend)
    assert backend.mount_blob("reg/team/other", src.digest, REPO)
    assert calls.count("CopyObject") == 1 and calls.count("PutObject") <= 1  # the marker only
    assert backend.blob_size("reg/team/other", src.digest) == src.size
    assert not backend.mount_blob("reg/team/other", sha256_digest(b"absent"), REPO)


def test_part_size_grows_to_fit_ten_thousand_parts() -> None:
    assert part_size_for(100 * MiB, PART) == PART
    huge = 200 * 1024 * MiB
    size = part_size_for(huge, PART)
    assert size % MiB == 0 and -(-huge // size) <= MAX_PARTS
    with pytest.raises(InputError, match="minimum"):
        S3Backend(RegistryRoot("s3", "any-bucket", ""), part_size=MiB)


# -- layout, manifests, tags ------------------------------------------------------------------


def test_layout_in_the_bucket(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    manifest = _push(backend, tmp_path, b"weights", "v1")
    layer = json.loads(manifest.data)["layers"][0]["digest"]
    keys = {o["Key"] for o in raw.list_objects_v2(Bucket=s3_bucket, Prefix="reg/")["Contents"]}
    assert keys == {
        f"{REPO}/repository.json",
        f"{REPO}/blobs/sha256/{layer[7:]}",
        f"{REPO}/manifests/sha256/{manifest.digest[7:]}",
        f"{REPO}/tags/v1",
        *(f"{REPO}/_tags/{shard:02x}.json" for shard in {0, shard_of("v1")}),  # the tag index; no marker left
    }
    stored = raw.get_object(Bucket=s3_bucket, Key=f"{REPO}/manifests/sha256/{manifest.digest[7:]}")
    assert stored["ContentType"] == media.OCI_MANIFEST and stored["Body"].read() == manifest.data
    tag = json.loads(raw.get_object(Bucket=s3_bucket, Key=f"{REPO}/tags/v1")["Body"].read())
    assert tag == {
        "mediaType": media.OCI_MANIFEST,
        "digest": manifest.digest,
        "size": len(manifest.data),
    }
    marker = json.loads(raw.get_object(Bucket=s3_bucket, Key=f"{REPO}/repository.json")["Body"].read())
    assert marker["mediaType"] == "application/vnd.trainops.s3.repository.v1+json"


def test_moto_enforces_conditional_writes(raw: Any, s3_bucket: str) -> None:
    """The primitives tag moves rely on, checked on the server itself."""
    from botocore.exceptions import ClientError

    raw.put_object(Bucket=s3_bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        raw.put_object(Bucket=s3_bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    stale = raw.head_object(Bucket=s3_bucket, Key="k")["ETag"]
    raw.put_object(Bucket=s3_bucket, Key="k", Body=b"3", IfMatch=stale)
    with pytest.raises(ClientError) as lost:
        raw.put_object(Bucket=s3_bucket, Key="k", Body=b"4", IfMatch=stale)
    assert lost.value.response["Error"]["Code"] == "PreconditionFailed"
    with pytest.raises(ClientError):
        raw.delete_object(Bucket=s3_bucket, Key="k", IfMatch=stale)
    assert raw.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"3"


def test_tag_move_that_loses_a_race_rereads_and_retries(
    backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path
) -> None:
    first = _push(backend, tmp_path, b"first", "hot")
    rival = _push(backend, tmp_path, b"rival", None)
    mine = _push(backend, tmp_path, b"mine", None)
    rival_tag = json.dumps({"mediaType": media.OCI_MANIFEST, "digest": rival.digest, "size": len(rival.data)}).encode()
    conditional: list[str] = []

    def race(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == f"{REPO}/tags/hot" and "IfMatch" in params:
            conditional.append(params["IfMatch"])
            if len(conditional) == 1:  # another writer moves the tag between our read and write
                raw.put_object(Bucket=s3_bucket, Key=f"{REPO}/tags/hot", Body=rival_tag)

    backend.client.meta.events.register("before-parameter-build.s3.PutObject", race)
    backend.put_manifest(REPO, mine, tag="hot")
    assert len(conditional) == 2 and conditional[0] != conditional[1]  # 412, re-read, retried
    assert backend.get_manifest(REPO, "hot").digest == mine.digest
    assert backend.get_manifest(REPO, first.digest).data == first.data


def test_tag_creation_uses_if_none_match(backend: S3Backend, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        if "/tags/" in str(params.get("Key")):
            seen.append(dict(params))

    backend.client.meta.events.register("before-parameter-build.s3.PutObject", record)
    _push(backend, tmp_path, b"one", "new")
    _push(backend, tmp_path, b"two", "new")
    assert [("IfNoneMatch" in p, "IfMatch" in p) for p in seen] == [(True, False), (False, True)]
    seen.clear()
    backend.put_manifest(REPO, backend.get_manifest(REPO, "new"), tag="new")  # already there
    assert seen == []


def test_sixteen_threads_moving_one_tag(s3_bucket: str, tmp_path: Path) -> None:
    backend = S3Backend(RegistryRoot("s3", s3_bucket, "reg"))
    _push(backend, tmp_path, b"seed", "hot")
    written: dict[str, ManifestData] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(16)
    lock = threading.Lock()

    def worker(i: int) -> None:
        try:
            layer = _file(tmp_path, f"weights-{i}".encode())
            backend.upload_blob(REPO, layer)
            manifest = _manifest([layer])
            start.wait(timeout=60)
            backend.put_manifest(REPO, manifest, tag="hot")
            with lock:
                written[manifest.digest] = manifest
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(written) == 16
    final = backend.get_manifest(REPO, "hot")
    assert final.digest in written and final.data == written[final.digest].data
    for layer in json.loads(final.data)["layers"]:
        assert backend.blob_size(REPO, layer["digest"]) == layer["size"]
    assert set(backend.list_manifests(REPO)) >= set(written)
    backend.close()


def test_tag_pagination_with_a_small_page(s3_bucket: str, raw: Any, tmp_path: Path) -> None:
    backend = S3Backend(RegistryRoot("s3", s3_bucket, "reg"), page_size=2)
    manifest = _push(backend, tmp_path, b"w", None)
    tags = [f"v{i}" for i in range(7)]
    for tag in tags:
        backend.put_manifest(REPO, manifest, tag=tag)
    raw.delete_object(Bucket=s3_bucket, Key=f"{REPO}/_tags/00.json")  # no complete index: list the tags
    calls = Calls(backend)
    assert backend.list_tags(REPO) == sorted(tags)
    assert calls.count("ListObjectsV2") == 1 + 4  # the pending writes, then 2 + 2 + 2 + 1
    backend.close()


def test_list_repositories_under_the_prefix(s3_bucket: str, tmp_path: Path) -> None:
    backend = S3Backend(RegistryRoot("s3", s3_bucket, "reg"), page_size=1)
    src = _file(tmp_path, b"x")
    for repo in (
        "reg/a",
        "reg/a/nested",
        "reg/team/model",
        "reg/team/deep/er",
        "other/z",
        "region/q",
    ):
        backend.upload_blob(repo, src)
    assert backend.list_repositories() == [
        "reg/a",
        "reg/a/nested",
        "reg/team/deep/er",
        "reg/team/model",
    ]
    everything = S3Backend(RegistryRoot("s3", s3_bucket, ""))
    assert "other/z" in everything.list_repositories() and "region/q" in everything.list_repositories()
    backend.close()
    everything.close()


def test_referrers_and_their_removal(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    target = _push(backend, tmp_path, b"checkpoint", "ckpt")
    assert backend.referrers(REPO, target.digest) == []
    subject = {"mediaType": media.OCI_MANIFEST, "digest": target.digest, "size": len(target.data)}
    reports = [
        _push(
            backend,
            tmp_path,
            f"eval {i}".encode(),
            None,
            subject=subject,
            annotations={"dev.trainops.kind": "eval", "n": str(i)},
        )
        for i in range(2)
    ]
    found = backend.referrers(REPO, target.digest)
    assert [d.digest for d in found] == sorted(r.digest for r in reports)
    assert all(d.artifact_type == media.ARTIFACT_TYPES["checkpoint"] for d in found)
    assert {d.annotations["n"] for d in found} == {"0", "1"}
    entry = f"{REPO}/referrers/{target.digest[7:]}/{reports[0].digest[7:]}"
    assert raw.head_object(Bucket=s3_bucket, Key=entry)["ContentLength"] > 0
    backend.delete_manifest(REPO, reports[0].digest)
    assert [d.digest for d in backend.referrers(REPO, target.digest)] == [reports[1].digest]
    assert "Contents" not in raw.list_objects_v2(Bucket=s3_bucket, Prefix=entry)


def test_delete_manifest_removes_only_tags_that_point_at_it(backend: S3Backend, tmp_path: Path) -> None:
    gone = _push(backend, tmp_path, b"gone", "a")
    backend.put_manifest(REPO, gone, tag="b")
    keep = _push(backend, tmp_path, b"keep", "c")
    backend.delete_manifest(REPO, gone.digest)
    assert backend.list_tags(REPO) == ["c"]
    assert backend.get_manifest(REPO, "c").digest == keep.digest
    assert gone.digest not in backend.list_manifests(REPO)
    with pytest.raises(NotFoundError):
        backend.delete_manifest(REPO, gone.digest)


def test_corrupt_manifest_is_refused(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    manifest = _push(backend, tmp_path, b"w", "v1")
    raw.put_object(Bucket=s3_bucket, Key=f"{REPO}/manifests/sha256/{manifest.digest[7:]}", Body=b"{}")
    with pytest.raises(IntegrityError):
        backend.get_manifest(REPO, "v1")
    with pytest.raises(IntegrityError):
        backend.put_manifest(REPO, ManifestData(b"{}", media.OCI_MANIFEST, manifest.digest))


def test_tag_pointing_at_a_deleted_manifest(backend: S3Backend, raw: Any, s3_bucket: str, tmp_path: Path) -> None:
    manifest = _push(backend, tmp_path, b"w", "v1")
    raw.delete_object(Bucket=s3_bucket, Key=f"{REPO}/manifests/sha256/{manifest.digest[7:]}")
    with pytest.raises(NotFoundError, match="points at"):
        backend.get_manifest(REPO, "v1")


# -- errors ----------------------------------------------------------------------------------


def test_missing_bucket_says_to_create_it(s3_bucket: str, tmp_path: Path) -> None:
    name = f"missing-{uuid.uuid4().hex[:10]}"
    backend = S3Backend(RegistryRoot("s3", name, ""))
    for action in (
        lambda: backend.list_tags("team/model"),
        lambda: backend.get_manifest("team/model", "v1"),
        lambda: backend.upload_blob("team/model", _file(tmp_path, b"x")),
        lambda: backend.list_repositories(),
    ):
        with pytest.raises(NotFoundError) as err:
            action()
        assert f"bucket {name!r} does not exist" in str(err.value)
        assert f"aws s3 mb s3://{name}" in str(err.value)
    backend.close()


def test_missing_repository_and_tag(backend: S3Backend, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no repository"):
        backend.list_tags("reg/never/pushed")
    _push(backend, tmp_path, b"w", "v1")
    with pytest.raises(NotFoundError, match="no tag"):
        backend.get_manifest(REPO, "nope")
    with pytest.raises(NotFoundError, match="no tag"):
        backend.delete_tag(REPO, "nope")
    with pytest.raises(NotFoundError, match="is not in"):
        backend.open_blob(REPO, sha256_digest(b"absent"))


def test_unreachable_endpoint_names_it(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    backend = S3Backend(RegistryRoot("s3", s3_bucket, ""), max_attempts=1)
    with pytest.raises(RemoteError) as err:
        backend.list_tags("team/model")
    assert endpoint in str(err.value) and "AWS_ENDPOINT_URL" in str(err.value)
    backend.close()


class _AuthMoto(MotoS3):
    """moto's server with request authentication on: unknown access keys are refused."""

    def _spawn(self, cmd: Any, env: Any = None) -> None:
        super()._spawn(cmd, env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"})


def test_refused_credentials_are_a_remote_error_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _AuthMoto(tmp_path / "auth-moto")
    server.start()
    try:
        secret = planted.secret("aws-secret-key")
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        backend = S3Backend(RegistryRoot("s3", "some-bucket", ""), max_attempts=1)
        with pytest.raises(RemoteError) as err:
            backend.list_tags("team/model")
        text = str(err.value)
        assert "InvalidAccessKeyId" in text and "credentials" in text and secret not in text
        backend.close()
    finally:
        server.stop()


def test_bad_digest_and_tag_are_input_errors(backend: S3Backend) -> None:
    with pytest.raises(InputError):
        backend.blob_size(REPO, "sha256:nothex")
    with pytest.raises(InputError):
        backend.get_manifest(REPO, "../../etc")
