"""The last test of the suite (marked `after_all`: tests/conftest.py orders it after every
other test collected; a parallel run leaves it out, and scripts/run-tests.sh runs it once every
worker has ended, on their root, named by TRAINOPS_LEAKS_ROOT): no planted secret in anything
the session wrote.

Every test that hands trainops a credential takes it from trainops_testing/planted.py. Here every file
under the session's temporary root is read — rendered trees, registry storage (Distribution's
blobs, OCI layouts, moto's data), image layers (gzip ones decompressed), logs, and every
object of every git repository (through `git cat-file`, since git compresses them) — and
each planted value must appear only in the files the tests declared as its source.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops_testing import planted

LIMIT = 512 * 1024 * 1024  # larger files are read in a streaming way all the same; this bounds gzip output
CHUNK = 4 * 1024 * 1024


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head == b"\x1f\x8b":
            try:
                with gzip.open(fh) as unzipped:
                    total = 0
                    while total < LIMIT and (chunk := unzipped.read(CHUNK)):
                        total += len(chunk)
                        yield chunk
                return
            except (OSError, EOFError, zlib.error):
                fh.seek(0)
        while chunk := fh.read(CHUNK):
            yield chunk


def _contains(chunks: Iterator[bytes], needles: dict[str, bytes]) -> set[str]:
    found: set[str] = set()
    tail = b""
    keep = max(len(n) for n in needles.values())
    for chunk in chunks:
        window = tail + chunk
        found.update(name for name, needle in needles.items() if needle in window)
        tail = window[-keep:]
    return found


def _git_dirs(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        if "HEAD" in filenames and "objects" in dirnames and "refs" in dirnames:
            yield Path(dirpath)


def _git_objects(git_dir: Path) -> Iterator[bytes]:
    proc = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    while chunk := proc.stdout.read(CHUNK):
        yield chunk
    proc.wait()


def _root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary root, or that of the parallel run before this one: workers of
    a pytest-xdist run each write under a directory of their own, and scripts/run-tests.sh
    scans their root once they have all ended."""
    earlier = os.environ.get("TRAINOPS_LEAKS_ROOT")
    return Path(earlier) if earlier else tmp_path_factory.getbasetemp()


def _scan(root: Path, values: dict[str, str], sources: set[Path]) -> tuple[int, list[str]]:
    """How many files were read, and each planted value found outside its sources."""
    needles = {name: value.encode() for name, value in values.items()}
    leaks: list[str] = []
    scanned = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file() or path.resolve() in sources:
                continue
            try:
                hits = _contains(_chunks(path), needles)
            except OSError:
                continue
            scanned += 1
            leaks += [f"{which} in {path}" for which in sorted(hits)]
    for git_dir in _git_dirs(root):
        leaks += [
            f"{which} in a git object of {git_dir}" for which in sorted(_contains(_git_objects(git_dir), needles))
        ]
    return scanned, leaks


def test_every_workers_record_is_scanned_and_its_sources_kept() -> None:
    """Two workers planted the same name with values of their own, each recorded with its
    sources: each value is found in a file that is not a source, and in none that is. (Made
    outside the session's root, which the real scan reads.)"""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for worker in ("popen-gw0", "popen-gw1"):
            (root / worker).mkdir()
            value = f"planted-token-{worker}-{os.urandom(6).hex()}"
            (root / worker / "config.json").write_text(value)  # declared: holds it on purpose
            (root / worker / "rendered.yaml").write_text(f"env: {value}\n")  # a leak
            record = {"secrets": {"token": value}, "sources": [str((root / worker / "config.json").resolve())]}
            (root / worker / planted.RECORD).write_text(json.dumps(record))
        scanned, leaks = _scan(root, *planted.recorded(root))
        assert scanned == 2
        assert sorted(leaks) == [
            f"token@popen-gw0 in {root / 'popen-gw0' / 'rendered.yaml'}",
            f"token@popen-gw1 in {root / 'popen-gw1' / 'rendered.yaml'}",
        ]


@pytest.mark.after_all
def test_no_planted_secret_outside_its_source(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = _root(tmp_path_factory)
    values, sources = planted.recorded(root)
    if not values:
        pytest.skip("no test of this session planted a secret")  # a subset run that handled no credentials
    scanned, leaks = _scan(root, values, sources)
    assert scanned > 0
    assert not leaks, f"planted secrets leaked ({len(leaks)}): {leaks[:10]}"
