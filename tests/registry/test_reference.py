"""Reference and registry URL parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import InputError
from trainops.registry.reference import parse_reference, parse_registry

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "scheme", "location", "repo", "tag", "digest"),
    [
        ("oci://host:5000/team/model:v1", "oci", "host:5000", "team/model", "v1", None),
        (f"oci://registry.example.com/llm/m@{DIGEST}", "oci", "registry.example.com", "llm/m", None, DIGEST),
        (f"oci://h/a/b:t@{DIGEST}", "oci", "h", "a/b", "t", DIGEST),
        ("oci://[::1]:5000/x", "oci", "[::1]:5000", "x", None, None),
        ("s3://bucket/team/model:v1", "s3", "bucket", "team/model", "v1", None),
        ("file:///srv/registry/team/model:v1", "file", "", "/srv/registry/team/model", "v1", None),
        ("file:///srv/r/a/../b", "file", "", "/srv/r/b", None, None),
    ],
)
def test_parse(text: str, scheme: str, location: str, repo: str, tag: str | None, digest: str | None) -> None:
    ref = parse_reference(text)
    assert (ref.scheme, ref.location, ref.repository, ref.tag, ref.digest) == (scheme, location, repo, tag, digest)


def test_round_trip_str() -> None:
    for text in ("oci://host:5000/team/model:v1", f"s3://bkt/a/b:c@{DIGEST}", "file:///x/y:z"):
        assert str(parse_reference(text)) == text


def test_completed_by_default_registry(tmp_path: Path) -> None:
    assert str(parse_reference("tiny/ckpt:v1", default_registry="oci://h:5000/llm")) == "oci://h:5000/llm/tiny/ckpt:v1"
    local = parse_reference("tiny/ckpt:v1", default_registry="file://.trainops/registry", base_dir=tmp_path)
    assert local.repository == str(tmp_path / ".trainops/registry/tiny/ckpt")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("team/model:v1", "names no registry"),
        ("http://host/x", "unknown scheme"),
        ("oci://host/UPPER", "lowercase"),
        ("oci://host/a:b:c", "tag"),
        ("oci://host/a@sha256:123", "not a sha256 digest"),
        ("oci://ho st/a", "host"),
        ("s3://ab/x", "bucket"),
        ("oci://host", "no repository"),
        ("oci://host/a:" + "t" * 129, "tag"),
    ],
)
def test_rejects(text: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_reference(text)
    assert fragment in str(err.value)


def test_registry_roots(tmp_path: Path) -> None:
    assert parse_registry("oci://h:5000/llm").prefix == "llm"
    assert parse_registry("s3://bucket/a/b").location == "bucket"
    assert parse_registry("file://reg", base_dir=tmp_path).prefix == str(tmp_path / "reg")
    with pytest.raises(InputError):
        parse_registry("harbor.example.com/llm")
