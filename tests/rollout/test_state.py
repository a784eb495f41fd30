"""The served release is read as a Reference: its digest and its version (tag, else short digest)."""

from __future__ import annotations

import pytest

from trainops.errors import InputError
from trainops.rollout.state import Served

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("release", "version"),
    [
        (f"oci://registry.example.com:5000/team/model:v1@{DIGEST}", "v1"),
        (f"oci://registry.example.com:5000/model@{DIGEST}", DIGEST[:19]),
        (f"file:///srv/registry/model:v2@{DIGEST}", "v2"),
    ],
)
def test_version_and_digest_of_a_release(release: str, version: str) -> None:
    served = Served(release, f"registry.example.com/serve@{DIGEST}")
    assert (served.version, served.digest) == (version, DIGEST)
    assert served.matches(version) and served.matches(DIGEST[:19])


def test_an_unpinned_release_is_refused() -> None:
    with pytest.raises(InputError, match="not pinned by digest"):
        _ = Served("oci://registry.example.com/model:v1", "registry.example.com/serve").digest
