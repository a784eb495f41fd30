"""Serving only what verifies: `rollout start` under release.signing.required (exit 8 naming
what failed), and the init container's command as rendered (golden file) run for real
against a signed release, then a tampered one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.eval.conftest import Project as ReleaseProject
from tests.render.helpers import REPO
from tests.rollout.helpers import rollout, tree
from tests.signing.conftest import ec_key, signed_release
from trainops.errors import InputError
from trainops.manifest import load_manifest
from trainops.manifest.stages import SigningSpec
from trainops.registry.store import resolve
from trainops.signing.attest import attest
from trainops.signing.signer import open_signer
from trainops_testing.cli import run
from trainops_testing.projects import IMAGE, make_project

GOLDEN = REPO / "tests/golden/serve/vllm-argo-rollouts-signed/rollout.yaml"


def _sign(manifest: Path, ref: str, key: str) -> None:
    loaded = load_manifest(manifest)
    from trainops.registry.context import Registries

    signer = open_signer(SigningSpec(key=key), root=manifest.parent)
    with Registries.for_manifest(loaded) as regs:
        attest(regs, found=resolve(regs, ref=regs.ref(ref)), signer=signer, created="2026-12-04T00:00:00Z")


def test_rollout_start_refuses_an_unsigned_or_badly_signed_release(tmp_path: Path) -> None:
    root = tmp_path / "project"
    keys = root / "keys"
    keys.mkdir(parents=True)
    ec_key(keys)
    ec_key(keys, "other")
    signing = {"publicKey": "keys/release.pub", "required": True}
    project = make_project(root, {"spec": {"release": {"source": "best", "signing": signing}}})
    unsigned = run("rollout", *project.cli("start", "tiny-llm/model:v1", "--image", IMAGE))
    assert unsigned.code == 8 and "it is not signed" in unsigned.last_error_line, unsigned.stderr
    _sign(project.manifest, "tiny-llm/model:v1", "keys/other.pem")
    other = run("rollout", *project.cli("start", "tiny-llm/model:v1", "--image", IMAGE))
    assert other.code == 8 and "Key mismatch" in other.last_error_line, other.stderr
    _sign(project.manifest, "tiny-llm/model:v1", "keys/release.pem")
    started = run("rollout", *project.cli("start", "tiny-llm/model:v1", "--image", IMAGE, "-o", "json"))
    assert started.code == 0, started.stderr
    assert "model:v1@" in json.loads(started.stdout)["stable"]["release"]


def _init_command() -> list[str]:
    docs = list(yaml.safe_load_all(GOLDEN.read_text()))
    pod = next(d for d in docs if d and d.get("kind") == "Rollout")["spec"]["template"]["spec"]
    command: list[str] = pod["initContainers"][0]["command"]
    return command


def test_the_rendered_init_container_verifies_before_it_copies(local_project: ReleaseProject) -> None:
    result = signed_release(local_project)
    command = _init_command()
    assert command[:2] == ["trainops", "pull"] and command[4:6] == ["--verify-signature", "--key"]
    mounted = local_project.root / "etc-signing"  # stands for the ConfigMap's mount
    mounted.mkdir()
    (mounted / "release.pub").write_bytes((local_project.root / "keys/release.pub").read_bytes())
    models = local_project.root / "models"

    def init() -> object:
        argv = [*command[1:2], result["ref"], str(models), *command[4:6], str(mounted / Path(command[6]).name)]
        return local_project.trainops(*argv)

    ok = init()
    assert ok.code == 0 and (models / "model.safetensors").is_file(), ok.stderr  # type: ignore[attr-defined]
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
    layer = next(x for x in found.parsed.layers if x.annotations["org.cncf.model.filepath"] == "model.safetensors")
    blob = local_project.root / ".trainops/registry" / found.ref.repository / "blobs/sha256" / layer.digest[7:]
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # same size, other content
    blob.write_bytes(bytes(data))
    models = local_project.root / "models-2"
    bad = init()
    assert bad.code == 7 and "model.safetensors" in bad.last_error_line  # type: ignore[attr-defined]
    assert not models.exists() or not any(models.iterdir())


def test_verify_signature_with_an_image_volume_is_refused(tmp_path: Path) -> None:
    overlay = rollout({"modelDelivery": "image-volume", "verifySignature": {"secret": "release-signing"}})
    with pytest.raises(InputError, match="verifySignature needs modelDelivery init-container"):
        tree(tmp_path, overlay)
