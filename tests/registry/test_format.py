"""The artifact format on disk, and pulls that must refuse hostile or damaged artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from tests.registry.conftest import make_tree
from trainops.errors import InputError, IntegrityError, NotFoundError
from trainops.registry import media, pulling, store
from trainops.registry.backends.base import BlobSource, ManifestData, sha256_digest
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.parents import pin_parents
from trainops.registry.schema import config_json_schema

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def local(tmp_path: Path) -> Registries:
    return Registries(default_registry=f"file://{tmp_path / 'registry'}")


def test_committed_config_schema_matches_the_model() -> None:
    committed = json.loads((REPO_ROOT / "registry/schema/config.v1.json").read_text())
    assert committed == config_json_schema(), "regenerate registry/schema/config.v1.json"


def _manifest_and_config(reg: Registries, ref: str) -> tuple[dict[str, object], dict[str, object]]:
    found = store.resolve(reg, ref=reg.ref(ref))
    body = json.loads(found.manifest.data)
    backend = reg.backend(found.ref)
    with backend.open_blob(found.ref.repository, body["config"]["digest"]) as fh:
        config = json.loads(fh.read())
    return body, config


def test_checkpoint_format(local: Registries, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "c", {"model.safetensors": b"w" * 100, "config.json": b"{}", "README.md": b"# m"})
    parent = store.push(local, source=src, ref=local.ref("m/c:1"), kind="checkpoint")
    lineage = Lineage(
        step=2, metrics={"val_loss": 1.5}, run_id="r1", parents=pin_parents(local, [("m/c:1", "resumed-from")])
    )
    store.push(local, source=src, ref=local.ref("m/c:2"), kind="checkpoint", lineage=lineage)
    body, config = _manifest_and_config(local, "m/c:2")
    assert body["artifactType"] == media.ARTIFACT_TYPES["checkpoint"]
    assert body["config"]["mediaType"] == media.CONFIG  # type: ignore[index]
    layers = body["layers"]
    assert [layer["annotations"][media.A_FILEPATH] for layer in layers] == [
        "README.md",
        "config.json",
        "model.safetensors",
    ]  # type: ignore[union-attr, index]
    assert [layer["mediaType"] for layer in layers] == [media.DOC_RAW, media.WEIGHT_CONFIG_RAW, media.WEIGHT_RAW]  # type: ignore[union-attr, index]
    jsonschema.validate(config, config_json_schema())
    assert config["lineage"]["parents"][0]["digest"] == parent.digest  # type: ignore[index]
    annotated = json.loads(body["annotations"][media.A_LINEAGE])  # type: ignore[index]
    assert annotated == config["lineage"]


def test_model_config_is_modelpack_shaped(local: Registries, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "m", {"model.safetensors": b"w" * 10, "tokenizer.json": b"{}"})
    store.push(local, source=src, ref=local.ref("m/model:v1"), kind="model")
    body, config = _manifest_and_config(local, "m/model:v1")
    assert body["artifactType"] == media.MODEL_ARTIFACT
    assert body["config"]["mediaType"] == media.MODEL_CONFIG  # type: ignore[index]
    assert set(config) == {"descriptor", "config", "modelfs"}
    assert config["modelfs"] == {"type": "layers", "diffIds": [layer["digest"] for layer in body["layers"]]}  # type: ignore[union-attr, index]
    assert config["config"] == {"format": "safetensors"}


def _hostile(reg: Registries, tmp_path: Path, path: str) -> str:
    """Write, straight through the backend, an artifact whose one file is at path."""
    ref = reg.ref("evil/art:x")
    backend = reg.backend(ref)
    data = b"pwned"
    blob = tmp_path / "blob"
    blob.write_bytes(data)
    config = b"{}"
    (tmp_path / "cfg").write_bytes(config)
    for raw, name in ((data, "blob"), (config, "cfg")):
        backend.upload_blob(ref.repository, BlobSource(sha256_digest(raw), len(raw), path=tmp_path / name))
    body = {
        "schemaVersion": 2,
        "mediaType": media.OCI_MANIFEST,
        "config": {"mediaType": media.OCI_EMPTY, "digest": sha256_digest(config), "size": len(config)},
        "layers": [
            {
                "mediaType": media.WEIGHT_RAW,
                "digest": sha256_digest(data),
                "size": len(data),
                "annotations": {media.A_FILEPATH: path},
            }
        ],
    }
    raw_manifest = json.dumps(body).encode()
    backend.put_manifest(
        ref.repository, ManifestData(raw_manifest, media.OCI_MANIFEST, sha256_digest(raw_manifest)), tag="x"
    )
    return "evil/art:x"


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd-trainops", "a/../../b", "a\\..\\b", "./a", "a//b", "C:x"])
def test_pull_refuses_paths_that_escape(local: Registries, tmp_path: Path, path: str) -> None:
    name = _hostile(local, tmp_path, path)
    dest = tmp_path / "dest" / "inner"
    with pytest.raises(IntegrityError, match="escape"):
        pulling.pull(local, ref=local.ref(name), dest=dest)
    assert not dest.exists()
    assert not (tmp_path / "dest" / "escape").exists()
    assert not Path("/etc/passwd-trainops").exists()


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("x" * 5000, r"'xxx.*… \(5000 characters\) has a name of 5000 bytes; no filesystem holds more than 255"),
        ("dir/" + "é" * 128, "has a name of 256 bytes"),
        ("a\ud800b", "not valid Unicode"),
    ],
)
def test_pull_refuses_names_no_filesystem_holds(local: Registries, tmp_path: Path, path: str, said: str) -> None:
    # found by the fuzz test: a 5000-byte name reached the filesystem (OSError, File name too long)
    name = _hostile(local, tmp_path, path)
    dest = tmp_path / "dest"
    with pytest.raises(IntegrityError, match=said) as refused:
        pulling.pull(local, ref=local.ref(name), dest=dest)
    assert "x" * 100 not in str(refused.value) and "\n" not in str(refused.value)  # one readable line
    assert not dest.exists()


def test_pull_refuses_to_write_through_a_symlink(local: Registries, tmp_path: Path) -> None:
    name = _hostile(local, tmp_path, "sub/file")
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    with pytest.raises(IntegrityError, match="symlink"):
        pulling.pull(local, ref=local.ref(name), dest=dest)
    assert list(outside.iterdir()) == []


def test_tampered_pull_leaves_dest_as_it_was(local: Registries, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "c", {"a.bin": os.urandom(4096), "b.bin": os.urandom(4096)})
    pushed = store.push(local, source=src, ref=local.ref("m/c:1"), kind="checkpoint")
    found = store.resolve(local, ref=local.ref("m/c:1"))
    victim = json.loads(found.manifest.data)["layers"][1]["digest"]
    blob = Path(found.ref.repository) / "blobs/sha256" / victim[7:]
    blob.chmod(0o644)
    blob.write_bytes(b"x" * 4096)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(IntegrityError):
        pulling.pull(local, ref=local.ref(f"m/c@{pushed.digest}"), dest=dest)
    assert sorted(p.name for p in dest.iterdir()) == ["keep.txt"]
    assert not any(p.name.startswith(".dest.") for p in tmp_path.iterdir())  # no staging left


def test_push_refusals(local: Registries, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "c", {"a": b"1"})
    with pytest.raises(InputError, match="digest"):
        store.push(local, source=src, ref=local.ref(f"m/c@sha256:{'0' * 64}"))
    with pytest.raises(InputError, match="no files"):
        (tmp_path / "empty").mkdir()
        store.push(local, source=tmp_path / "empty", ref=local.ref("m/c:1"))
    with pytest.raises(NotFoundError):
        pin_parents(local, [("m/never:1", "parent")])
    with pytest.raises(InputError, match="kind"):
        store.push(local, source=src, ref=local.ref("m/c:1"), kind="weird")


def test_same_tree_same_digest(local: Registries, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    files = {"w.safetensors": b"abc", "d/x.json": b"{}"}
    one = store.push(local, source=make_tree(tmp_path / "one", files), ref=local.ref("m/a:1"), kind="checkpoint")
    two = store.push(local, source=make_tree(tmp_path / "two", files), ref=local.ref("m/b:1"), kind="checkpoint")
    assert one.digest == two.digest
