"""`trainops hub import` against a real model in huggingface_hub's cache layout, offline."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.hub.conftest import Hub
from trainops.registry import media
from trainops_testing.cli import run
from trainops_testing.hf_cache import REPO_ID, TAG, HfCache


def _import(*args: str, env: dict[str, str | None] | None = None) -> dict[str, object]:
    out = run("hub", "import", *args, "-o", "json", env=env)
    assert out.code == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _show(ref: str) -> dict[str, object]:
    out = run("registry", "show", ref, "-o", "json")
    assert out.code == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _tree_digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_import_from_the_hf_cache_offline_records_repo_and_commit(
    hf_cache: HfCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache.root))
    ref = f"file://{tmp_path}/reg/minilm:v1"
    first = _import(REPO_ID, ref)
    assert first["commit"] == hf_cache.commit
    assert first["files"] == len(hf_cache.files)
    assert first["bytesSent"] >= 90_000_000  # type: ignore[operator]

    info = _show(ref)
    assert info["kind"] == "model"
    assert info["artifactType"] == media.MODEL_ARTIFACT
    lineage = info["lineage"]
    assert lineage["gitCommit"] == hf_cache.commit  # type: ignore[index]
    assert lineage["gitRepo"] == f"https://huggingface.co/{REPO_ID}"  # type: ignore[index]
    notes = info["annotations"]
    assert notes["dev.trainops.hub.repo"] == REPO_ID  # type: ignore[index]
    assert notes["dev.trainops.hub.revision"] == hf_cache.commit  # type: ignore[index]
    types = {f["path"]: f["mediaType"] for f in info["files"]}  # type: ignore[attr-defined]
    assert types["model.safetensors"] == media.WEIGHT_RAW
    assert types["config.json"] == media.WEIGHT_CONFIG_RAW
    assert types["README.md"] == media.DOC_RAW
    assert {f["path"]: f["digest"] for f in info["files"]} == hf_cache.files  # type: ignore[attr-defined]

    # the bytes round-trip: pulled back verified, they are the package's own files
    pulled = run("pull", ref, str(tmp_path / "out"))
    assert pulled.code == 0, pulled.stderr
    assert _tree_digests(tmp_path / "out") == hf_cache.files

    again = _import(REPO_ID, ref)
    assert again["bytesSent"] == 0
    assert again["digest"] == first["digest"]
    assert again["blobsSkipped"] == len(hf_cache.files) + 1  # and the config blob


def test_import_by_tag_resolves_the_commit(hf_cache: HfCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache.root))
    ref = f"file://{tmp_path}/reg/minilm:tagged"
    result = _import(f"{REPO_ID}@{TAG}", ref, "--include", "*.json", "--exclude", "data_config.json")
    assert result["commit"] == hf_cache.commit
    assert result["revision"] == TAG
    info = _show(ref)
    paths = sorted(f["path"] for f in info["files"])  # type: ignore[attr-defined]
    expected = sorted(p for p in hf_cache.files if p.endswith(".json") and p != "data_config.json")
    assert paths == expected and "1_Pooling/config.json" in paths
    assert info["annotations"]["dev.trainops.hub.requested"] == TAG  # type: ignore[index]


@pytest.mark.parametrize("where", ["cache", "repo-folder", "snapshot"])
def test_from_dir_reads_every_cache_level(hf_cache: HfCache, tmp_path: Path, where: str) -> None:
    directory = {"cache": hf_cache.root, "repo-folder": hf_cache.repo_dir, "snapshot": hf_cache.snapshot}[where]
    ref = f"file://{tmp_path}/reg/m:{where}"
    result = _import(REPO_ID, ref, "--from-dir", str(directory))
    assert result["commit"] == hf_cache.commit
    assert {f["path"]: f["digest"] for f in _show(ref)["files"]} == hf_cache.files  # type: ignore[attr-defined]


def test_from_dir_plain_snapshot_reads_the_local_dir_commit(model_dir: Path, hf_cache: HfCache, tmp_path: Path) -> None:
    """A `snapshot_download(local_dir=…)` folder: the commit is in .cache/huggingface, which is not pushed."""
    local = tmp_path / "local"
    shutil.copytree(model_dir, local)
    meta = local / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (meta / f"{name}.metadata").write_text(f"{hf_cache.commit}\netag\n1700000000.0\n")
    ref = f"file://{tmp_path}/reg/m:local"
    result = _import(REPO_ID, ref, "--from-dir", str(local))
    assert result["commit"] == hf_cache.commit
    paths = [f["path"] for f in _show(ref)["files"]]  # type: ignore[attr-defined]
    assert not any(p.startswith(".cache") for p in paths) and len(paths) == len(hf_cache.files)


def _nothing_pushed(tmp_path: Path) -> bool:
    return not (tmp_path / "reg").exists()


@pytest.mark.parametrize(
    ("spec", "code", "words"),
    [
        ("nobody/no-such-model", 4, "is not in the Hugging Face cache"),
        (f"{REPO_ID}@no-such-branch", 4, "is not in the Hugging Face cache"),
        ("not a repo id", 3, "is not a Hugging Face repo id"),
        (f"{REPO_ID}@", 3, "empty revision"),
    ],
)
def test_bad_repo_or_revision_is_one_line_and_pushes_nothing(
    hf_cache: HfCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, code: int, words: str
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache.root))
    out = run("hub", "import", spec, f"file://{tmp_path}/reg/m:v1")
    assert out.code == code, out.stderr
    assert words in out.last_error_line and len(out.stderr.strip().splitlines()) == 1
    assert _nothing_pushed(tmp_path)


def test_unreachable_hub_is_a_remote_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainops_testing.services import free_port

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    out = run("hub", "import", REPO_ID, f"file://{tmp_path}/reg/m:v1")
    assert out.code == 6, out.stderr
    assert "could not be reached" in out.last_error_line
    assert _nothing_pushed(tmp_path)


def test_from_dir_of_another_repository_is_refused(hf_cache: HfCache, tmp_path: Path) -> None:
    out = run(
        "hub", "import", "someone/other-model", f"file://{tmp_path}/reg/m:v1", "--from-dir", str(hf_cache.snapshot)
    )
    assert out.code == 3, out.stderr
    assert "snapshot of another repository" in out.last_error_line
    assert _nothing_pushed(tmp_path)


def test_patterns_that_match_nothing_push_nothing(hf_cache: HfCache, tmp_path: Path) -> None:
    out = run(
        "hub", "import", REPO_ID, f"file://{tmp_path}/reg/m:v1", "--from-dir", str(hf_cache.root), "--include", "*.gguf"
    )
    assert out.code == 3, out.stderr
    assert "matches the --include/--exclude patterns" in out.last_error_line
    assert _nothing_pushed(tmp_path)


def test_import_to_a_distribution_registry(hf_cache: HfCache, registry: object, tmp_path: Path) -> None:
    """The same import against a real OCI registry; skopeo reads it back independently."""
    import subprocess

    host = registry.host  # type: ignore[attr-defined]
    ref = f"oci://{host}/hub/minilm:v1"
    result = _import(REPO_ID, ref, "--from-dir", str(hf_cache.root), "--insecure")
    again = _import(REPO_ID, ref, "--from-dir", str(hf_cache.root), "--insecure")
    assert again["bytesSent"] == 0 and again["digest"] == result["digest"]
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{host}/hub/minilm:v1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    manifest = json.loads(raw.stdout)
    assert manifest["artifactType"] == media.MODEL_ARTIFACT
    assert manifest["annotations"]["dev.trainops.hub.revision"] == hf_cache.commit
    assert sum(layer["size"] for layer in manifest["layers"]) == result["bytesTotal"]


def test_a_cached_commit_needs_no_network(hf_cache: HfCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Online, but the Hub unreachable: a commit the cache holds imports all the same."""
    from trainops_testing.services import free_port

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache.root))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    result = _import(f"{REPO_ID}@{hf_cache.commit}", f"file://{tmp_path}/reg/m:v1")
    assert result["commit"] == hf_cache.commit and result["files"] == len(hf_cache.files)
    # a branch is asked of the Hub (it may have moved); unreachable, huggingface_hub falls
    # back to the commit the cache recorded for it
    branch = _import(REPO_ID, f"file://{tmp_path}/reg/m:v2")
    assert branch["commit"] == hf_cache.commit and branch["bytesSent"] == 0


@pytest.mark.parametrize("revision", [None, TAG, "commit"])
def test_the_cache_fast_path_agrees_with_huggingface_hub(hf_cache: HfCache, revision: str | None) -> None:
    """cache_lookup reads the layout alone; huggingface_hub's own reader finds the same snapshot."""
    from huggingface_hub import snapshot_download

    from trainops.hub.importer import cache_lookup

    rev = hf_cache.commit if revision == "commit" else revision
    ours = cache_lookup(cache=hf_cache.root, repo_id=REPO_ID, revision=rev)
    theirs = snapshot_download(REPO_ID, revision=rev, cache_dir=str(hf_cache.root), local_files_only=True)
    assert ours is not None and ours.path == Path(theirs) and ours.commit == hf_cache.commit
    assert cache_lookup(cache=hf_cache.root, repo_id=REPO_ID, revision="../../etc") is None
    assert cache_lookup(cache=hf_cache.root, repo_id="nobody/none", revision=rev) is None


def test_import_over_http_from_a_hub_server(
    hub_server: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_dir: Path
) -> None:
    """snapshot_download for real, over HTTP from olah; then the cache serves a re-import."""
    from huggingface_hub import constants

    from trainops_testing.planted import secret

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_TOKEN", secret("hf-token"))  # sent to the Hub; found nowhere trainops writes
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 120)  # a loaded 2-core machine
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 120)
    ref = f"file://{tmp_path}/reg/minilm:v1"
    first = _import(f"{REPO_ID}@{TAG}", ref, "--exclude", "*.md")
    assert first["commit"] == hub_server.commit  # the mirror's real git commit, resolved from the tag
    info = _show(ref)
    assert info["lineage"]["gitRepo"] == f"{hub_server.endpoint}/{REPO_ID}"  # type: ignore[index]
    assert "README.md" not in {f["path"] for f in info["files"]}  # type: ignore[attr-defined]
    expected = {k: v for k, v in _tree_digests(model_dir).items() if not k.endswith(".md")}
    assert {f["path"]: f["digest"] for f in info["files"]} == expected  # type: ignore[attr-defined]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the cache now holds it: no network at all
    again = _import(f"{REPO_ID}@{TAG}", ref, "--exclude", "*.md")  # the tag, resolved from the cache's refs
    assert again["bytesSent"] == 0 and again["digest"] == first["digest"]


def test_unknown_repo_over_http_is_one_line_and_pushes_nothing(
    hub_server: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    for spec in ("nobody/no-such-model", f"{REPO_ID}@no-such-branch"):
        out = run("hub", "import", spec, f"file://{tmp_path}/reg/m:v1")
        assert out.code == 4, out.stderr  # olah reports an unknown revision as an unknown repository
        assert "no such repository" in out.last_error_line and len(out.stderr.strip().splitlines()) == 1
    assert _nothing_pushed(tmp_path)
