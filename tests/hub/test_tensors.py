"""`registry show` of models and checkpoints: tensors from the safetensors headers, read with
ranged reads on every backend, never the tensors; hostile headers are one-line errors."""

from __future__ import annotations

import json
import os
import struct
import uuid
from pathlib import Path

import pytest

from trainops_testing.cli import run
from trainops_testing.hf_cache import REPO_ID, HfCache


def _registry_url(scheme: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    if scheme == "file":
        return f"file://{tmp_path}/reg", []
    if scheme == "oci":
        registry = request.getfixturevalue("registry")
        return f"oci://{registry.host}/t{uuid.uuid4().hex[:8]}", ["--insecure"]
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/reg", []


def _independent_count(path: Path) -> tuple[int, int, set[str]]:
    """Tensors, parameters and dtypes of a file, by the safetensors library itself."""
    from safetensors import safe_open

    count = params = 0
    dtypes: set[str] = set()
    with safe_open(str(path), framework="numpy") as fh:
        for key in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
            part = fh.get_slice(key)
            count += 1
            shape = part.get_shape()
            n = 1
            for d in shape:
                n *= d
            params += n
            dtypes.add(part.get_dtype())
    return count, params, dtypes


@pytest.mark.parametrize("scheme", ["file", "oci", "s3"])
def test_show_reads_the_tensors_of_a_real_model_by_ranges(
    scheme: str, hf_cache: HfCache, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, flags = _registry_url(scheme, tmp_path, request)
    ref = f"{url}/minilm:v1"
    assert run("hub", "import", REPO_ID, ref, "--from-dir", str(hf_cache.root), *flags).code == 0
    out = run("registry", "show", ref, "-o", "json", *flags)
    assert out.code == 0, out.stderr
    tensors = json.loads(out.stdout)["tensors"]
    count, params, dtypes = _independent_count(hf_cache.snapshot / "model.safetensors")
    assert (tensors["tensors"], tensors["parameters"], set(tensors["dtypes"])) == (count, params, dtypes)
    assert tensors["files"] == 1
    assert tensors["shapes"][0] == {"dtype": "F32", "shape": [30522, 384], "tensors": 1, "parameters": 30522 * 384}
    # the header only: 8 bytes + its JSON, not the 87 MiB of tensors
    header_len = struct.unpack("<Q", (hf_cache.snapshot / "model.safetensors").read_bytes()[:8])[0]
    assert tensors["headerBytes"] == 8 + header_len
    text = run("registry", "show", ref, *flags)
    assert f"{params:,} parameters" in text.stdout and "F32" in text.stdout


def _hostile(kind: str) -> bytes:
    good = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    if kind == "huge-length":
        return struct.pack("<Q", 2**63) + good + bytes(16)
    if kind == "bad-json":
        body = b'{"w": {"dtype": "F32", '
        return struct.pack("<Q", len(body)) + body + bytes(16)
    if kind == "offsets-past-end":
        body = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 1 << 40]}}).encode()
        return struct.pack("<Q", len(body)) + body + bytes(16)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["huge-length", "bad-json", "offsets-past-end"])
def test_show_names_a_hostile_header_in_one_line_and_shows_the_rest(kind: str, tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "model.safetensors").write_bytes(_hostile(kind))
    good = b'{"b":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}}'
    (src / "ok.safetensors").write_bytes(struct.pack("<Q", len(good)) + good + bytes(6))
    ref = f"file://{tmp_path}/reg/run:step-1"
    assert run("push", str(src), ref, "--kind", "checkpoint").code == 0  # checkpoints are pushed as they are
    out = run("registry", "show", ref, "-o", "json")
    assert out.code == 0, out.stderr
    tensors = json.loads(out.stdout)["tensors"]
    assert (tensors["tensors"], tensors["parameters"], tensors["dtypes"]) == (1, 3, {"F16": 3})
    (reason,) = tensors["unreadable"].values()
    assert "not a valid safetensors file" in reason and "\n" not in reason
    assert tensors["headerBytes"] < 4096  # bounded: a huge length is refused before reading it
    text = run("registry", "show", ref)
    assert "unreadable: model.safetensors: not a valid safetensors file" in text.stdout


@pytest.mark.parametrize("kind", ["huge-length", "bad-json", "offsets-past-end"])
def test_a_hostile_model_is_neither_pushed_nor_imported(kind: str, tmp_path: Path) -> None:
    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text('{"architectures": ["BertModel"]}')
    (src / "model.safetensors").write_bytes(_hostile(kind))
    pushed = run("push", str(src), f"file://{tmp_path}/reg/m:v1", "--kind", "model")
    imported = run("hub", "import", "team/hostile", f"file://{tmp_path}/reg/m:v2", "--from-dir", str(src))
    for out in (pushed, imported):
        assert out.code == 3, out.stderr
        assert "not a valid safetensors file" in out.last_error_line
    assert not (tmp_path / "reg").exists()


def test_push_and_import_fill_the_modelpack_config(hf_cache: HfCache, tmp_path: Path) -> None:
    """paramSize, precision and format come from the local files' headers."""
    for args in (
        ("push", str(hf_cache.snapshot), f"file://{tmp_path}/reg/a:v1", "--kind", "model"),
        ("hub", "import", REPO_ID, f"file://{tmp_path}/reg/b:v1", "--from-dir", str(hf_cache.root)),
    ):
        assert run(*args).code == 0
    for name in ("a", "b"):
        repo = tmp_path / "reg" / name
        index = json.loads((repo / "index.json").read_text())
        manifest_digest = index["manifests"][0]["digest"]
        manifest = json.loads((repo / "blobs" / "sha256" / manifest_digest[7:]).read_bytes())
        config = json.loads((repo / "blobs" / "sha256" / manifest["config"]["digest"][7:]).read_bytes())
        assert config["config"]["format"] == "safetensors"
        assert config["config"]["paramSize"] == "22.7m"
        assert config["config"]["precision"] == "fp32"
        assert config["config"]["architecture"] == "BertModel"
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
