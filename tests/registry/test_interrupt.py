"""SIGKILL in the middle of a push: no reader sees a partial artifact; the re-run sends only what is missing."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.registry.conftest import Target, make_tree
from trainops.errors import NotFoundError
from trainops.registry import pulling, store

FILES = 24
SIZE = 8 * 1024 * 1024


def _tree(root: Path) -> tuple[Path, dict[str, int]]:
    files = {f"shard-{i:02d}.safetensors": os.urandom(SIZE) for i in range(FILES)}
    make_tree(root, files)
    return root, {"sha256:" + hashlib.sha256(data).hexdigest(): len(data) for data in files.values()}


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_push_killed_midway_then_rerun(target: Target, tmp_path: Path) -> None:
    src, blobs = _tree(tmp_path / "ckpt")
    ref = target.registries.ref("big/ckpt:v1")
    backend = target.registries.backend(ref)
    env = {**os.environ, "TRAINOPS_INSECURE_REGISTRIES": ref.location if target.scheme == "oci" else ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops.cli.main", "push", str(src), str(ref), "--kind", "checkpoint", "-j", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    present: set[str] = set()
    try:
        while not present:  # one file sent (one at a time: -j 1), most still to go
            assert proc.poll() is None, f"push ended before it could be interrupted: {proc.communicate()}"
            assert time.monotonic() < deadline, "no blob arrived within 120 s"
            present = {d for d in blobs if backend.blob_size(ref.repository, d) is not None}
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(present) < FILES, "the push finished before the kill; use a larger tree"
    with pytest.raises(NotFoundError):
        store.resolve(target.registries, ref=ref)  # no partial artifact is visible
    done = {d for d in blobs if backend.blob_size(ref.repository, d) is not None}
    result = store.push(target.registries, source=src, ref=ref, kind="checkpoint")
    missing = sum(size for digest, size in blobs.items() if digest not in done)
    assert result.bytes_sent <= missing + 4096  # only what was missing (and the config)
    assert result.bytes_sent < FILES * SIZE
    pulled = pulling.pull(target.registries, ref=ref, dest=tmp_path / "out")
    assert pulled.digest == result.digest and len(pulled.files) == FILES
