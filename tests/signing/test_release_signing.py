"""Signing at release and `release verify` on file://, oci:// (Distribution: the referrers
tag schema) and s3://: the model signature in model signing's format, the SLSA provenance,
both referrers of the release; tampering, another key, a forced release."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from tests.eval.conftest import Project
from tests.eval.test_release import setup
from tests.signing.conftest import ec_key, signed_release
from trainops.registry import media
from trainops.registry.store import resolve
from trainops.signing.keys import load_public_key
from trainops.signing.records import list_records
from trainops.signing.verify import check_provenance


def test_release_is_signed_with_provenance_and_verifies(project: Project) -> None:
    result = signed_release(project)
    assert result["signedBy"].startswith("sha256:") and result["signature"] and result["provenance"]
    with project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        referrers = regs.backend(found.ref).referrers(found.ref.repository, found.manifest.digest)
    kinds = sorted(
        (d.artifact_type, d.annotations.get(media.A_BUNDLE_PREDICATE))
        for d in referrers
        if d.artifact_type != media.ARTIFACT_TYPES["eval"]
    )
    assert kinds == [
        (media.SIGSTORE_BUNDLE, media.SLSA_PROVENANCE),
        (media.SIGSTORE_BUNDLE, media.MODEL_SIGNING_PREDICATE),
    ] or kinds == sorted(kinds)
    out = project.trainops("release", "verify", result["ref"], "-o", "json")
    assert out.code == 0, out.stderr
    verified = json.loads(out.stdout)
    assert verified["key"] == result["signedBy"] and verified["pulled"] is True
    assert verified["files"] == ["model.safetensors", "trainer_state.json"]
    deps = verified["provenance"]["dependencies"]
    assert any(d.startswith("checkpoint ") for d in deps) and any(d.startswith("eval-report ") for d in deps)
    shown = json.loads(project.trainops("release", "show", result["ref"], "-o", "json").stdout)
    assert shown["signedBy"] == [result["signedBy"]] and shown["provenance"] == result["provenance"]
    # a second create adds nothing
    again = project.trainops("release", "create", "step-2", "-o", "json")
    assert again.code == 0 and json.loads(again.stdout)["signature"] is None


def _blob_path(project: Project, ref: str, relpath: str) -> Path:
    with project.registries() as regs:
        found = resolve(regs, ref=regs.ref(ref))
    layer = next(layer for layer in found.parsed.layers if layer.annotations.get(media.A_FILEPATH) == relpath)
    return project.root / ".trainops/registry" / found.ref.repository / "blobs/sha256" / layer.digest[7:]


def test_a_replaced_blob_fails_verify_and_pull_naming_the_file(local_project: Project) -> None:
    result = signed_release(local_project)
    blob = _blob_path(local_project, result["ref"], "model.safetensors")
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # same size, other content
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    out = local_project.trainops("release", "verify", result["ref"])
    assert out.code == 7 and "model.safetensors" in out.last_error_line, out.stderr
    dest = local_project.root / "served"
    pulled = local_project.trainops("pull", result["ref"], str(dest), "--verify-signature", "--key", "keys/release.pub")
    assert pulled.code == 7 and "model.safetensors" in pulled.last_error_line
    assert not dest.exists() or not any(dest.iterdir())


def test_another_key_fails(local_project: Project) -> None:
    result = signed_release(local_project)
    ec_key(local_project.root / "keys", "other")
    out = local_project.trainops("release", "verify", result["ref"], "--key", "keys/other.pub")
    assert out.code == 7 and "Key mismatch" in out.last_error_line, out.stderr
    assert result["signature"].split("@")[1] in out.last_error_line  # names the signature that failed
    pulled = local_project.trainops(
        "pull", result["ref"], str(local_project.root / "x"), "--verify-signature", "--key", "keys/other.pub"
    )
    assert pulled.code == 7 and not (local_project.root / "x").exists()
    ok = local_project.trainops(
        "pull", result["ref"], str(local_project.root / "y"), "--verify-signature", "--key", "keys/release.pub"
    )
    assert ok.code == 0 and (local_project.root / "y/model.safetensors").is_file()


def test_the_model_signing_cli_verifies_a_trainops_signature(local_project: Project) -> None:
    result = signed_release(local_project)
    root = local_project.root
    assert local_project.trainops("pull", result["ref"], str(root / "model")).code == 0
    assert local_project.trainops("pull", result["signature"], str(root / "sig")).code == 0
    cli = [str(Path(sys.executable).parent / "model_signing"), "verify", "key"]
    args = ["--signature", str(root / "sig/model.sig"), "--public_key", str(root / "keys/release.pub")]
    ok = subprocess.run([*cli, *args, str(root / "model")], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (root / "model/trainer_state.json").write_text('{"step": 99}')
    bad = subprocess.run([*cli, *args, str(root / "model")], capture_output=True, text=True, check=False)
    assert bad.returncode != 0 and "trainer_state.json" in bad.stdout + bad.stderr


def test_a_forced_release_says_so_in_its_provenance(local_project: Project) -> None:
    keys = local_project.root / "keys"
    keys.mkdir()
    ec_key(keys)
    setup(local_project, release={"signing": {"key": "keys/release.pem"}})
    out = local_project.trainops(
        "release", "create", "step-2", "--force", "--reason", "hotfix for incident 7", "-o", "json"
    )
    assert out.code == 0, out.stderr
    ref = json.loads(out.stdout)["ref"]
    verified = local_project.trainops("release", "verify", ref, "-o", "json")
    assert verified.code == 0, verified.stderr
    assert json.loads(verified.stdout)["provenance"]["forced"]["reason"] == "hotfix for incident 7"
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(ref))
        record = next(r for r in list_records(regs, subject=found) if r.predicate_type == media.SLSA_PROVENANCE)
    statement = json.loads(base64.b64decode(json.loads(record.content)["dsseEnvelope"]["payload"]))
    params = statement["predicate"]["buildDefinition"]["externalParameters"]
    assert params["forced"]["reason"] == "hotfix for incident 7"
    assert "eval-report" not in [d["name"] for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]]


def test_checkpoints_get_signed_provenance_with_the_flag(local_project: Project) -> None:
    keys = local_project.root / "keys"
    keys.mkdir()
    ec_key(keys)
    setup(local_project, release={"signing": {"key": "keys/release.pem", "checkpoints": True}})
    ckpts = local_project.root / "run" / "step-000007"
    ckpts.mkdir(parents=True)
    (ckpts / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (ckpts / "trainer_state.json").write_text('{"step": 7}')
    (ckpts / ".complete").write_text("")
    out = local_project.trainops(
        "ckpt", "watch", str(local_project.root / "run"), "--once", "--run-id", "r9", "--layout", "trainops"
    )
    assert out.code == 0, out.stderr
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref("tiny-llm/checkpoints:step-7"))
        records = list_records(regs, subject=found)
        assert [r.predicate_type for r in records] == [media.SLSA_PROVENANCE]  # provenance only, no model signature
        public = load_public_key(keys / "release.pub")
        summary = check_provenance(regs, found=found, public=public)
    assert summary.build_type == "https://trainops.dev/provenance/checkpoint/v1" and summary.signed_by
