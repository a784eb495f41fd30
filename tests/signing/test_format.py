"""trainops' model signature is model signing's format: the statement equals the one
model_signing's own Payload builds for the same files, and its verifier accepts the bundle;
a bundle model_signing's CLI made verifies in trainops."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from google.protobuf import json_format
from model_signing import manifest as ms_manifest
from model_signing._hashing import hashing
from model_signing._signing import signing as ms_signing

from tests.signing.conftest import ec_key
from trainops.manifest.stages import SigningSpec
from trainops.registry.backends.base import sha256_digest
from trainops.signing.keys import load_public_key
from trainops.signing.model_sig import IGNORED, model_statement, verified_files
from trainops.signing.signer import open_signer

FILES = {"model.safetensors": b"weights" * 1000, "config.json": b'{"a": 1}', "sub/tokenizer.json": b"{}"}


def test_the_statement_is_model_signings_payload(tmp_path: Path) -> None:
    files = {rel: sha256_digest(data) for rel, data in FILES.items()}
    ours = model_statement(name="tiny:v1", files=files).as_json()
    serialization = ms_manifest.SerializationType.from_args(
        {"method": "files", "hash_type": "sha256", "allow_symlinks": False, "ignore_paths": list(IGNORED)}
    )
    items = [serialization.new_item(rel, hashing.Digest("sha256", bytes.fromhex(d[7:]))) for rel, d in files.items()]
    theirs = json_format.MessageToDict(
        ms_signing.Payload(ms_manifest.Manifest("tiny:v1", items, serialization)).statement.pb
    )
    assert ours == theirs


def test_a_model_signing_cli_signature_verifies_in_trainops(tmp_path: Path) -> None:
    model = tmp_path / "model"
    for rel, data in FILES.items():
        (model / rel).parent.mkdir(parents=True, exist_ok=True)
        (model / rel).write_bytes(data)
    private, public = ec_key(tmp_path)
    cli = str(Path(sys.executable).parent / "model_signing")
    sig = tmp_path / "model.sig"
    done = subprocess.run(
        [cli, "sign", "key", "--private_key", str(private), "--signature", str(sig), str(model)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    signed = verified_files(sig.read_bytes(), public=load_public_key(public), where="cli")
    assert signed == {rel: sha256_digest(data) for rel, data in FILES.items()}
    # and trainops' own bundle of the same files verifies with the CLI on the directory
    signer = open_signer(SigningSpec(key=str(private)), root=tmp_path)
    ours = tmp_path / "ours.sig"
    ours.write_bytes(signer.sign(model_statement(name="model", files=signed)))
    check = [cli, "verify", "key", "--signature", str(ours), "--public_key", str(public), str(model)]
    verified = subprocess.run(check, capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(ours.read_bytes())["verificationMaterial"] == json.loads(sig.read_bytes())["verificationMaterial"]
