"""oci:// transfers against a real Distribution registry: parallel ranged downloads, damaged
and broken ranges, redirects, proxies from the environment, sendfile uploads, connections."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from tests.registry.proxy import FaultProxy
from trainops.errors import IntegrityError
from trainops.registry.backends.base import BlobSource
from trainops.registry.backends.oci import OCIBackend
from trainops.registry.reference import RegistryRoot
from trainops_testing.services import DistributionRegistry

KiB = 1024


def _backend(host: str) -> OCIBackend:
    backend = OCIBackend(RegistryRoot("oci", host, ""), insecure=True)
    # small parts, so that a 3 MiB blob is a parallel ranged download of 12 ranges
    backend.downloads.part = 256 * KiB
    backend.downloads.ranged_min = 1024 * KiB
    return backend


def _blob(registry: DistributionRegistry, tmp_path: Path, size: int) -> tuple[str, BlobSource]:
    data = os.urandom(size)
    path = tmp_path / f"blob-{uuid.uuid4().hex[:8]}"
    path.write_bytes(data)
    source = BlobSource("sha256:" + hashlib.sha256(data).hexdigest(), size, path=path)
    repo = f"transfer/{uuid.uuid4().hex[:8]}"
    _backend(registry.host).upload_blob(repo, source)
    return repo, source


def _ranges(proxy: FaultProxy) -> list[str]:
    return [h.get("Range", "") for method, path, h in proxy.seen if method == "GET" and "/blobs/sha256:" in path]


def test_a_large_blob_comes_as_parallel_ranges_and_is_verified(registry: DistributionRegistry, tmp_path: Path) -> None:
    repo, src = _blob(registry, tmp_path, 3 * 1024 * KiB + 123)
    seen: list[int] = []
    with FaultProxy(registry.host) as proxy:
        _backend(proxy.host).download_blob(repo, src.digest, tmp_path / "out", seen.append)
        ranges = _ranges(proxy)
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]
    assert len(ranges) == 13 and ranges[0] == f"bytes=0-{256 * KiB - 1}", ranges
    assert f"bytes={12 * 256 * KiB}-{src.size - 1}" in ranges
    assert sum(seen) == src.size


def test_a_damaged_range_fails_the_download_and_leaves_nothing(registry: DistributionRegistry, tmp_path: Path) -> None:
    repo, src = _blob(registry, tmp_path, 2 * 1024 * KiB)
    with FaultProxy(registry.host) as proxy:
        proxy.flip_next_blob_byte = 1000
        with pytest.raises(IntegrityError, match="expected " + src.digest):
            _backend(proxy.host).download_blob(repo, src.digest, tmp_path / "out")
        assert proxy.flip_next_blob_byte is None  # the damage was served
    assert not (tmp_path / "out").exists()


def test_a_range_cut_mid_stream_is_asked_for_again_from_where_it_broke(
    registry: DistributionRegistry, tmp_path: Path
) -> None:
    repo, src = _blob(registry, tmp_path, 2 * 1024 * KiB)
    with FaultProxy(registry.host) as proxy:
        proxy.cut_next_body_after = 100_000
        _backend(proxy.host).download_blob(repo, src.digest, tmp_path / "out")
        assert proxy.cuts_served == 1
        ranges = _ranges(proxy)
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]
    assert "bytes=100000-262143" in ranges, ranges  # the first range, resumed at its 100,000th byte


def test_a_small_blob_is_one_stream_and_an_empty_one_downloads(registry: DistributionRegistry, tmp_path: Path) -> None:
    repo, src = _blob(registry, tmp_path, 600 * KiB)  # under ranged_min: the first range, then the rest
    empty_repo, empty = _blob(registry, tmp_path, 0)
    with FaultProxy(registry.host) as proxy:
        backend = _backend(proxy.host)
        backend.download_blob(repo, src.digest, tmp_path / "out")
        backend.download_blob(empty_repo, empty.digest, tmp_path / "empty")
        ranges = _ranges(proxy)
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]
    assert (tmp_path / "empty").read_bytes() == b""
    assert ranges[:2] == [f"bytes=0-{256 * KiB - 1}", f"bytes={256 * KiB}-"], ranges


def test_blob_redirects_are_followed_without_the_registry_credentials(
    registry: DistributionRegistry, tmp_path: Path
) -> None:
    repo, src = _blob(registry, tmp_path, 300 * KiB)
    with FaultProxy(registry.host) as cdn, FaultProxy(registry.host) as front:
        front.redirect_blobs_to = f"http://{cdn.host}"
        backend = _backend(front.host)
        backend.session._tokens.put("*", "Basic c2VjcmV0")  # as after a login: sent to the registry only
        backend.download_blob(repo, src.digest, tmp_path / "out")
        assert front.seen and all(h.get("Authorization") == "Basic c2VjcmV0" for _, _, h in front.seen)
        assert len(cdn.seen) == len(front.seen) and all("Authorization" not in h for _, _, h in cdn.seen)
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes()  # type: ignore[union-attr]


def test_http_proxy_from_the_environment(
    registry: DistributionRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, src = _blob(registry, tmp_path, 100 * KiB)
    with FaultProxy(registry.host) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.host}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        backend = _backend(registry.host)
        assert backend.blob_size(repo, src.digest) == src.size
        assert proxy.seen[0][1] == f"http://{registry.host}/v2/{repo}/blobs/{src.digest}"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        before = len(proxy.seen)
        assert backend.blob_size(repo, src.digest) == src.size
        assert len(proxy.seen) == before


def test_uploads_and_listing_reuse_one_connection(registry: DistributionRegistry, tmp_path: Path) -> None:
    with FaultProxy(registry.host) as proxy:
        backend = _backend(proxy.host)
        for _ in range(3):
            data = os.urandom(50 * KiB)
            path = tmp_path / uuid.uuid4().hex
            path.write_bytes(data)
            backend.upload_blob(
                "reuse/x", BlobSource("sha256:" + hashlib.sha256(data).hexdigest(), len(data), path=path)
            )
        connections = set(proxy.connections)
    assert len(proxy.seen) == 6  # POST + PUT per blob
    assert len(connections) == 1


class _Stop(Exception):
    pass


def test_an_interrupted_ranged_download_stops_its_workers_and_keeps_only_its_verified_start(
    registry: DistributionRegistry, tmp_path: Path
) -> None:
    import threading

    repo, src = _blob(registry, tmp_path, 16 * 1024 * KiB)  # 64 ranges: most still to come
    before = threading.active_count()

    def progress(n: int) -> None:  # as Ctrl-C would, on the thread that hashes
        raise _Stop

    with pytest.raises(_Stop):
        _backend(registry.host).download_blob(repo, src.digest, tmp_path / "out", progress)
    assert threading.active_count() == before  # every range worker has ended
    kept = (tmp_path / "out").read_bytes()  # what was hashed in order: the blob's start, for a re-run
    assert 0 < len(kept) < src.size and kept == src.path.read_bytes()[: len(kept)]  # type: ignore[union-attr]
    seen: list[int] = []
    _backend(registry.host).download_blob(repo, src.digest, tmp_path / "out", seen.append)  # continues it
    assert (tmp_path / "out").read_bytes() == src.path.read_bytes() and sum(seen) == src.size  # type: ignore[union-attr]
