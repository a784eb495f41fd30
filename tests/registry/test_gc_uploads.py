"""gc and unfinished uploads: what an interrupted push left behind goes once it is older
than the grace period; an upload in flight (younger) is never touched.

file:// leaves `.trainops/tmp/*.part` files; s3:// leaves multipart uploads, whose parts
S3 keeps (and bills) until they are aborted. oci:// uploads belong to the registry.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import boto3
import pytest

from tests.registry.conftest import Target, make_tree
from trainops.registry import pulling, store
from trainops.registry.retention.gc import collect


def _push_one(target: Target, tmp_path: Path) -> str:
    src = make_tree(tmp_path / "src", {"weights.bin": b"w" * 4096})
    ref = target.registries.ref("team/ckpt:1")
    store.push(target.registries, source=src, ref=ref, kind="checkpoint")
    return ref.repository


@pytest.mark.parametrize("target", ["file"], indirect=True)
def test_stale_part_files_go_fresh_ones_stay(target: Target, tmp_path: Path) -> None:
    repo = _push_one(target, tmp_path)
    tmp = Path(repo) / ".trainops" / "tmp"
    old, fresh = tmp / "aaaa.part", tmp / "bbbb.part"
    old.write_bytes(b"x" * 1000)  # an upload a killed push left two hours ago
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    fresh.write_bytes(b"y" * 10)  # an upload in flight

    dry = collect(target.registries, root=target.registries.root(), dry_run=True)
    assert dry.removed_uploads == 1 and dry.bytes_freed >= 1000 and old.exists()
    done = collect(target.registries, root=target.registries.root())
    assert done.removed_uploads == 1
    assert not old.exists() and fresh.exists()
    assert collect(target.registries, root=target.registries.root(), grace=0).removed_uploads == 1  # now fresh too
    assert not fresh.exists()
    pulled = pulling.pull(target.registries, ref=target.registries.ref("team/ckpt:1"), dest=tmp_path / "out")
    assert pulled.files == ["weights.bin"]  # the artifact is untouched


@pytest.mark.parametrize("target", ["s3"], indirect=True)
def test_stale_multipart_uploads_are_aborted(target: Target, tmp_path: Path) -> None:
    _push_one(target, tmp_path)
    bucket = target.url.split("/")[2]
    client = boto3.client("s3")
    key = "reg/team/ckpt/blobs/sha256/" + "ab" * 32
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"p" * 5000)

    young = collect(target.registries, root=target.registries.root())  # started just now: within the grace
    assert young.removed_uploads == 0
    assert [u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [upload]
    done = collect(target.registries, root=target.registries.root(), grace=0)
    assert done.removed_uploads == 1 and done.bytes_freed >= 5000
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    pulled = pulling.pull(target.registries, ref=target.registries.ref("team/ckpt:1"), dest=tmp_path / "out")
    assert pulled.files == ["weights.bin"]
