"""record_file: the one reader of a small record artifact's file (signatures, incidents,
timelines, eval reports), on a file:// registry whose blobs a test can tamper with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.registry.conftest import make_tree
from trainops.errors import IntegrityError
from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.records import record_file
from trainops.registry.store import Resolved


def _pushed(tmp_path: Path, files: dict[str, bytes]) -> tuple[Registries, Resolved]:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    source = make_tree(tmp_path / "src", files)
    pushed = store.push(registries, source=source, ref=registries.ref("team/record:v1"), kind="other")
    return registries, store.resolve(registries, ref=pushed.ref)


def test_the_one_file_is_read(tmp_path: Path) -> None:
    registries, found = _pushed(tmp_path, {"record.json": b'{"ok": true}'})
    with registries:
        assert record_file(registries, found=found, what="a record", limit=1024) == b'{"ok": true}'


def test_a_file_over_the_limit_or_a_second_file_is_refused(tmp_path: Path) -> None:
    registries, found = _pushed(tmp_path, {"record.json": b"x" * 2048})
    with registries, pytest.raises(IntegrityError, match=r"a record has exactly one file of at most 1\.0 KiB"):
        record_file(registries, found=found, what="a record", limit=1024)
    registries, found = _pushed(tmp_path / "two", {"a.json": b"{}", "b.json": b"{}"})
    with registries, pytest.raises(IntegrityError, match="exactly one file"):
        record_file(registries, found=found, what="a record", limit=1024)


def test_only_layers_of_the_media_type_count(tmp_path: Path) -> None:
    registries, found = _pushed(tmp_path, {"record.json": b"{}"})
    with registries, pytest.raises(IntegrityError, match="exactly one file"):
        record_file(registries, found=found, what="a report", limit=1024, media_type="application/x-not-this")


def test_a_blob_that_does_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    registries, found = _pushed(tmp_path, {"record.json": b'{"ok": true}'})
    digest = found.parsed.layers[0].digest
    (blob,) = (tmp_path / "registry").rglob(digest.removeprefix("sha256:"))
    blob.write_bytes(b'{"ok": false}')
    with registries, pytest.raises(IntegrityError, match="the file of a record does not match its digest"):
        record_file(registries, found=found, what="a record", limit=1024)
