"""Other tools read what trainops pushes, and trainops reads what they push."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.registry.conftest import make_tree
from trainops.registry import media, pulling, store
from trainops.registry.context import Registries
from trainops.registry.inspect import show


@pytest.fixture
def oci(registry: object) -> Registries:
    host = registry.host  # type: ignore[attr-defined]
    return Registries(default_registry=f"oci://{host}/interop{uuid.uuid4().hex[:8]}", insecure_registries=(host,))


def _host(reg: Registries) -> str:
    return reg.root().location


def test_oras_py_pulls_what_trainops_pushed(oci: Registries, tmp_path: Path) -> None:
    import oras.client

    src = make_tree(tmp_path / "src", {"model.safetensors": os.urandom(300_000), "config.json": b'{"a": 1}'})
    pushed = store.push(oci, source=src, ref=oci.ref("m/c:v1"), kind="checkpoint")
    client = oras.client.OrasClient(hostname=_host(oci), insecure=True)
    out = tmp_path / "oras-out"
    target = str(pushed.ref).removeprefix("oci://").split("@")[0]
    files = client.pull(target=target, outdir=str(out))
    assert sorted(Path(f).name for f in files) == ["config.json", "model.safetensors"]
    for name in ("config.json", "model.safetensors"):
        assert filecmp.cmp(src / name, out / name, shallow=False)


def test_trainops_pulls_a_modelpack_artifact_oras_py_pushed(oci: Registries, tmp_path: Path) -> None:
    import oras.client

    work = make_tree(tmp_path / "model", {"model.safetensors": os.urandom(200_000), "tokenizer.json": b"{}"})
    config = tmp_path / "config.json"
    layers = sorted((work / n).stat().st_size for n in ("model.safetensors", "tokenizer.json"))
    config.write_text(
        json.dumps(
            {
                "descriptor": {"name": "other-tool"},
                "config": {"format": "safetensors"},
                "modelfs": {"type": "layers", "diffIds": [str(s) for s in layers]},
            }
        )
    )
    repo = oci.ref("thirdparty/model:v1")
    target = f"{repo.location}/{repo.repository}:v1"
    client = oras.client.OrasClient(hostname=_host(oci), insecure=True)
    cwd = os.getcwd()
    os.chdir(work)  # oras-py names files by the path it is given
    try:
        client.push(
            target=target,
            files=[f"model.safetensors:{media.WEIGHT_RAW}", f"tokenizer.json:{media.WEIGHT_CONFIG_RAW}"],
            manifest_config=f"{config}:{media.MODEL_CONFIG}",
            disable_path_validation=True,
        )
    finally:
        os.chdir(cwd)
    info = show(oci, ref=repo)
    assert info.kind == "model"
    assert {f.path: f.media_type for f in info.files} == {
        "model.safetensors": media.WEIGHT_RAW,
        "tokenizer.json": media.WEIGHT_CONFIG_RAW,
    }
    pulled = pulling.pull(oci, ref=repo, dest=tmp_path / "pulled")
    assert sorted(pulled.files) == ["model.safetensors", "tokenizer.json"]
    assert filecmp.cmp(work / "model.safetensors", tmp_path / "pulled/model.safetensors", shallow=False)


def test_skopeo_reads_and_copies_what_trainops_pushed(oci: Registries, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"w.safetensors": os.urandom(100_000), "state.json": b"{}"})
    pushed = store.push(oci, source=src, ref=oci.ref("m/c:v1"), kind="checkpoint")
    name = str(pushed.ref).removeprefix("oci://").split("@")[0]
    raw = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{name}"],
        check=True,
        capture_output=True,
    ).stdout
    assert "sha256:" + __import__("hashlib").sha256(raw).hexdigest() == pushed.digest
    layout = tmp_path / "layout"
    subprocess.run(
        ["skopeo", "copy", "--src-tls-verify=false", f"docker://{name}", f"oci:{layout}:v1"],
        check=True,
        capture_output=True,
    )
    local = Registries()
    copied = pulling.pull(local, ref=local.ref(f"file://{layout}:v1"), dest=tmp_path / "out")
    assert copied.digest == pushed.digest
    assert filecmp.cmp(src / "w.safetensors", tmp_path / "out/w.safetensors", shallow=False)


def test_skopeo_and_umoci_read_a_local_layout(tmp_path: Path) -> None:
    local = Registries(default_registry=f"file://{tmp_path / 'reg'}")
    src = make_tree(tmp_path / "src", {"w.safetensors": b"abc"})
    pushed = store.push(local, source=src, ref=local.ref("team/m:v1"), kind="checkpoint")
    store.push(local, source=src, ref=local.ref("team/m:v2"), kind="checkpoint")
    layout = tmp_path / "reg/team/m"
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{layout}:v1"], check=True, capture_output=True).stdout
    assert json.loads(raw)["artifactType"] == media.ARTIFACT_TYPES["checkpoint"]
    assert "sha256:" + __import__("hashlib").sha256(raw).hexdigest() == pushed.digest
    tags = subprocess.run(["umoci", "ls", "--layout", str(layout)], check=True, capture_output=True, text=True)
    assert tags.stdout.split() == ["v1", "v2"]
