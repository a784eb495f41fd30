"""Stage keys: the source digest (through the digest cache), the run environment, the key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from trainops.manifest import load_manifest
from trainops.pipeline.keys import installed_packages, run_environment, source_digest, stage_key
from trainops.registry.digestcache import DigestCache


def _manifest(root: Path) -> Path:
    doc = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "k"},
        "spec": {"image": {"builder": "docker", "include": ["src/**"]}},
    }
    path = root / "trainops.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_source_digest_follows_content_and_uses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "p"
    for i in range(50):
        (root / "src" / f"d{i % 5}").mkdir(parents=True, exist_ok=True)
        (root / "src" / f"d{i % 5}" / f"f{i}.py").write_text(f"x = {i}\n", encoding="utf-8")
    (root / "notes.md").write_text("docs\n", encoding="utf-8")
    manifest = load_manifest(_manifest(root))
    first = source_digest(manifest=manifest)
    assert len(first.files) == 50 and "notes.md" not in first.files
    cache = DigestCache()
    assert all(cache.lookup(root / "src" / f"d{i % 5}" / f"f{i}.py") for i in range(50))  # warm now
    (root / "notes.md").write_text("more docs\n", encoding="utf-8")
    assert source_digest(manifest=manifest).digest == first.digest  # outside the selection
    target = root / "src" / "d3" / "f3.py"
    target.write_text("x = 33\n", encoding="utf-8")
    changed = source_digest(manifest=manifest)
    assert changed.digest != first.digest
    target.write_text("x = 3\n", encoding="utf-8")
    assert source_digest(manifest=manifest).digest == first.digest  # same content, same digest
    target.chmod(0o755)
    assert source_digest(manifest=manifest).digest != first.digest  # the mode is an input too


def test_run_environment_names_this_interpreter() -> None:
    env = run_environment()
    assert env.python == ".".join(map(str, sys.version_info[:3]))
    packages = installed_packages()
    assert env.packages == len(packages) and any(p.startswith("pydantic==") for p in packages)
    assert run_environment().digest == env.digest


def test_stage_key_is_order_free_and_input_sensitive() -> None:
    a = stage_key(stage="train", config={"b": 1, "a": [1, 2]}, inputs={"x": "1", "y": "2"})
    b = stage_key(stage="train", config={"a": [1, 2], "b": 1}, inputs={"y": "2", "x": "1"})
    assert a == b
    assert a != stage_key(stage="train", config={"a": [2, 1], "b": 1}, inputs={"x": "1", "y": "2"})
    assert a != stage_key(stage="eval", config={"b": 1, "a": [1, 2]}, inputs={"x": "1", "y": "2"})


def test_digest_cache_keys_a_symlinked_directory_by_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "w.bin").write_bytes(b"weights")
    os.symlink(real, tmp_path / "link")
    cache = DigestCache(tmp_path / "cache.sqlite")
    digest, _ = cache.digest(tmp_path / "link" / "w.bin")
    assert DigestCache(tmp_path / "cache.sqlite").lookup(real / "w.bin") == (digest, 7)


def test_source_digest_without_an_image_ignores_bytecode_caches(tmp_path: Path) -> None:
    """A trainer importing the project writes __pycache__ into it (the cluster test's second
    `trainops run` saw a new key and submitted the job again); without an image spec the
    key leaves bytecode out, as it leaves out .trainops and .git."""
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("x = 1\n", encoding="utf-8")
    path = _manifest(root)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["spec"].pop("image", None)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    manifest = load_manifest(path)
    first = source_digest(manifest=manifest)
    assert "pkg/train.py" in first.files
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (root / "stray.pyc").write_bytes(b"\x00")
    assert source_digest(manifest=manifest).digest == first.digest
    (root / "pkg" / "train.py").write_text("x = 2\n", encoding="utf-8")
    assert source_digest(manifest=manifest).digest != first.digest
