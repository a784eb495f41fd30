"""Fuzzing (hypothesis) of artifacts read back from a registry: hostile manifests on pull.

A registry is outside trainops' control: whoever can push to it can write any manifest.
Pulling one must end in a verified tree inside the destination or in a one-line
TrainopsError, with nothing written outside the destination's staging area and nothing
unverified in the destination itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainops.errors import TrainopsError
from trainops.registry import media, pulling, store
from trainops.registry.backends.base import BlobSource, sha256_digest
from trainops.registry.context import Registries

FUZZ = settings(max_examples=200, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture])
CONTENT = b"hello, weights\n"
GOOD = sha256_digest(CONTENT)
CONFIG = b"{}"

hostile_paths = st.one_of(
    st.sampled_from(
        [
            "../escape",
            "/etc/passwd",
            "a/../../b",
            "",
            ".",
            "..",
            "a//b",
            "a/./b",
            "a\x00b",
            "x" * 5000,
            "dir/",
            "C:\\win",
            "~/home",
            "ok.bin",
            "sub/ok.bin",
            ".trainops-pull",
            "a/b/c/d/e.txt",
        ]
    ),
    st.text(max_size=40),
)
digests = st.one_of(
    st.just(GOOD),
    st.sampled_from(["sha256:" + "0" * 64, "sha256:../../x", "md5:abc", "", "sha256:" + GOOD[7:].upper(), GOOD + "x"]),
    st.text(max_size=20),
)
sizes = st.one_of(
    st.just(len(CONTENT)), st.integers(-5, 2**63), st.sampled_from([0, len(CONTENT) + 1, "15", None, 1.5])
)
media_types = st.one_of(
    st.sampled_from(
        [
            media.WEIGHT_RAW,
            "application/vnd.oci.image.layer.v1.tar",
            "",
            "x" * 300,
        ]
    ),
    st.text(max_size=20),
)
annotation_values = st.one_of(st.text(max_size=30), st.just("y" * 200_000), st.integers(), st.none())


def _layer(path: str, digest: Any, size: Any, mt: Any, extra: dict[str, Any]) -> dict[str, Any]:
    return {"mediaType": mt, "digest": digest, "size": size, "annotations": {media.A_FILEPATH: path, **extra}}


layers = st.builds(
    _layer,
    hostile_paths,
    digests,
    sizes,
    media_types,
    st.dictionaries(st.text(max_size=10), annotation_values, max_size=3),
)
manifests = st.fixed_dictionaries(
    {
        "schemaVersion": st.sampled_from([2, 1, "2", None]),
        "mediaType": st.sampled_from(["application/vnd.oci.image.manifest.v1+json", "text/plain"]),
        "config": st.one_of(
            st.just({"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha256_digest(CONFIG), "size": 2}),
            st.builds(lambda d, s: {"mediaType": "x", "digest": d, "size": s}, digests, sizes),
            st.none(),
            st.text(max_size=5),
        ),
        "layers": st.one_of(st.lists(layers, max_size=4), st.none(), st.just("nope"), st.just([1, None])),
    },
    optional={
        "annotations": st.one_of(st.dictionaries(st.text(max_size=10), annotation_values, max_size=4), st.just([])),
        "manifests": st.one_of(
            st.just([]), st.lists(st.builds(lambda d: {"mediaType": "x", "digest": d, "size": 1}, digests), max_size=2)
        ),
        "subject": st.one_of(st.none(), st.just({"digest": 5})),
        "artifactType": st.one_of(st.text(max_size=10), st.integers()),
    },
)


def _store_raw(root: Path, repo: str, data: bytes) -> None:
    """Write a manifest's bytes into the OCI layout as any other writer could."""
    layout = root / repo
    digest = sha256_digest(data)
    blob = layout / "blobs" / "sha256" / digest[7:]
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    index = json.loads((layout / "index.json").read_text())
    index["manifests"].append(
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": len(data),
            "annotations": {"org.opencontainers.image.ref.name": "hostile"},
        }
    )
    (layout / "index.json").write_text(json.dumps(index))


def _snapshot(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@FUZZ
@given(
    body=st.one_of(manifests, st.just([]), st.just("text"), st.just(None)),
    raw=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_pull_of_a_hostile_manifest(body: Any, raw: bytes | None, tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp("pull")
    registry_dir = work / "registry"
    registries = Registries(default_registry=f"file://{registry_dir}")
    seed = work / "seed.bin"
    seed.write_bytes(CONTENT)
    store.push(registries, source=seed, ref=registries.ref("fz:seed"))  # the layout, the blob, the config
    backend = registries.backend(registries.ref("fz"))
    backend.upload_blob(
        registries.ref("fz").repository, BlobSource(digest=sha256_digest(CONFIG), size=2, path=_file(work, CONFIG))
    )
    _store_raw(registry_dir, "fz", raw if raw is not None else json.dumps(body, default=str).encode())
    outside = work / "outside"
    outside.mkdir()
    before = _snapshot(work) - _snapshot(registry_dir)
    dest = work / "out" / "dest"
    try:
        result = pulling.pull(registries, ref=registries.ref("fz:hostile"), dest=dest)
    except TrainopsError as err:
        assert str(err).strip() and "Traceback" not in str(err)
        assert not dest.exists() or not any(dest.iterdir()), "a failed pull left files in the destination"
    else:
        for name in result.files:
            assert (dest / name).resolve().is_relative_to(dest.resolve())
            assert (dest / name).read_bytes() == CONTENT
    after = _snapshot(work) - _snapshot(registry_dir)
    strays = {p for p in after - before if not p.is_relative_to(work / "out")}
    assert not strays, f"pull wrote outside its destination: {sorted(strays)[:3]}"


def _file(work: Path, data: bytes) -> Path:
    path = work / f"blob-{sha256_digest(data)[7:15]}"
    path.write_bytes(data)
    return path
