"""tests/upstream/ holds exactly the upstream files SOURCES.md lists, byte for byte (each
file's sha256), for the versions pinned in scripts/kube-versions.env: a version bump without
`scripts/vendor_kube_sources.py` fails here, not in a cluster test."""

from __future__ import annotations

import hashlib

from trainops_testing.kube_bins import UPSTREAM, version


def _table() -> dict[str, str]:
    rows = [line.split(" | ") for line in (UPSTREAM / "SOURCES.md").read_text().splitlines() if line.startswith("| ")]
    return {row[0][2:]: row[2] for row in rows if not row[0].startswith(("| File", "|---"))}


def test_every_vendored_file_is_listed_with_its_sha256() -> None:
    table = _table()
    present = {str(p.relative_to(UPSTREAM)) for p in UPSTREAM.rglob("*") if p.is_file() and p.name != "SOURCES.md"}
    assert present == set(table)
    for path, digest in table.items():
        assert hashlib.sha256((UPSTREAM / path).read_bytes()).hexdigest() == digest, path


def test_the_vendored_versions_are_the_pinned_ones() -> None:
    dirs = {p.name for p in UPSTREAM.iterdir() if p.is_dir()}
    components = ("volcano", "jobset", "lws", "kueue", "kserve", "argocd", "rollouts", "kuberay", "trainer")
    assert dirs == {f"{c}-{version(c)}" for c in components}
