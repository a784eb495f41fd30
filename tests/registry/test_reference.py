"""Reference and registry URL parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import InputError, TrainopsError
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
    with pytest.raises(TrainopsError) as err:
        parse_reference(text)
    assert fragment in str(err.value)
    # no registry is a usage mistake (2), as everywhere; a malformed reference is bad input (3)
    assert err.value.exit_code == (2 if fragment == "names no registry" else 3)


@pytest.mark.parametrize(
    ("text", "default"),
    [
        ("file:///srv/reg/My Repo:v1", None),
        ("file:///srv/reg/Model:v1", None),
        ("file:///srv/reg/model-:v1", None),
        ("s3://bkt/Team/model:v1", None),
        ("oci://host/team/My_Model:v1", None),
        ("My/model:v1", "file:///srv/reg"),
        ("team/model name:v1", "oci://host/ns"),
    ],
)
def test_one_repository_name_rule_for_every_scheme(text: str, default: str | None) -> None:
    """OCI Distribution's grammar for every scheme, so what file:// accepts copies to OCI."""
    with pytest.raises(InputError, match="OCI Distribution rule"):
        parse_reference(text, default_registry=default)


def test_file_paths_outside_the_name_are_free() -> None:
    """Only the repository's own name follows the rule; the directories above it are the user's."""
    ref = parse_reference("file:///home/Alice/My Registry/team-model:v1")
    assert ref.repository == "/home/Alice/My Registry/team-model" and ref.tag == "v1"


def test_registry_roots(tmp_path: Path) -> None:
    assert parse_registry("oci://h:5000/llm").prefix == "llm"
    assert parse_registry("s3://bucket/a/b").location == "bucket"
    assert parse_registry("file://reg", base_dir=tmp_path).prefix == str(tmp_path / "reg")
    with pytest.raises(InputError):
        parse_registry("harbor.example.com/llm")
