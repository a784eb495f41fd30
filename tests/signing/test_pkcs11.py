"""PKCS#11 signing against a real token (SoftHSM 2): `release create` signs with the key in
the token (`release.signing.pkcs11`, the PIN from pin-source or $TRAINOPS_PKCS11_PIN), the
release verifies with the token's public key, and the PIN shows up nowhere: not in output,
not in the registry. A wrong PIN, a missing key, a pin-value in the manifest: one line,
nothing pushed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.eval.conftest import Project
from tests.eval.test_release import setup
from tests.signing.conftest import ec_key
from tests.signing.softhsm import PIN, Token, make_token
from trainops.signing.keys import load_public_key
from trainops.signing.pkcs11 import PIN_ENV


@pytest.fixture(scope="session")
def token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Token]:
    made = make_token(tmp_path_factory.mktemp("softhsm"))
    with pytest.MonkeyPatch.context() as patch:  # SoftHSM reads it when the library is first opened
        patch.setenv("SOFTHSM2_CONF", str(made.conf))
        yield made


def _project_with(project: Project, token: Token, uri: str) -> None:
    keys = project.root / "keys"
    keys.mkdir(exist_ok=True)
    shutil.copy(token.public_key, keys / "token.pub")
    setup(project, release={"signing": {"pkcs11": uri, "publicKey": "keys/token.pub"}})
    assert project.trainops("eval", "run", "step-2").code == 0


def _no_pin_anywhere(project: Project, *outputs: str) -> None:
    for text in outputs:
        assert PIN not in text
    for path in (project.root / ".trainops").rglob("*"):
        if path.is_file():
            assert PIN.encode() not in path.read_bytes(), path


def test_a_release_signed_in_the_token_verifies_with_its_public_key(
    local_project: Project, token: Token, tmp_path: Path
) -> None:
    pin_file = tmp_path / "pin"
    pin_file.write_text(PIN + "\n")  # as `echo PIN > file` writes it
    _project_with(local_project, token, token.uri(f"pin-source=file:{pin_file}"))
    made = local_project.trainops("release", "create", "step-2", "-o", "json")
    assert made.code == 0, made.stderr
    result = json.loads(made.stdout)
    assert result["signedBy"] == load_public_key(token.public_key).fingerprint
    verified = local_project.trainops("release", "verify", result["ref"], "-o", "json")
    assert verified.code == 0, verified.stderr
    assert json.loads(verified.stdout)["key"] == result["signedBy"]
    other = ec_key(local_project.root / "keys", "other")[1]
    refused = local_project.trainops("release", "verify", result["ref"], "--key", str(other))
    assert refused.code == 7 and "Key mismatch" in refused.last_error_line
    _no_pin_anywhere(local_project, made.stdout, made.stderr, verified.stdout, verified.stderr)


def test_the_pin_from_the_environment_and_a_wrong_one(
    local_project: Project, token: Token, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project_with(local_project, token, token.uri())
    monkeypatch.setenv(PIN_ENV, "0000-wrong")
    wrong = local_project.trainops("release", "create", "step-2")
    assert wrong.code == 3 and "CKR_PIN_INCORRECT" in wrong.last_error_line, wrong.stderr
    assert "0000-wrong" not in wrong.stderr and len(wrong.stderr.strip().splitlines()) <= 2
    assert "v1-step-2" not in local_project.trainops("registry", "ls", "tiny-llm/models").stdout
    monkeypatch.setenv(PIN_ENV, PIN)
    made = local_project.trainops("release", "create", "step-2", "-o", "json")
    assert made.code == 0, made.stderr
    assert json.loads(made.stdout)["signedBy"] == load_public_key(token.public_key).fingerprint
    _no_pin_anywhere(local_project, made.stdout, made.stderr)


def test_a_missing_key_and_a_pin_in_the_manifest_are_refused(
    local_project: Project, token: Token, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PIN_ENV, PIN)
    _project_with(local_project, token, token.uri().replace("object=release-key", "object=no-such-key"))
    missing = local_project.trainops("release", "create", "step-2")
    assert missing.code == 3 and "no-such-key" in missing.last_error_line, missing.stderr
    doc = yaml.safe_load(local_project.manifest.read_text())
    doc["spec"]["release"]["signing"]["pkcs11"] = token.uri(f"pin-value={PIN}")
    local_project.manifest.write_text(yaml.safe_dump(doc))
    inline = local_project.trainops("release", "create", "step-2")
    assert inline.code == 3 and "pin-value would put the PIN in git" in inline.stderr, inline.stderr
    assert "trainops.yaml" in inline.stderr and "release.signing" in inline.stderr  # where, as every spec error
    assert PIN not in inline.stderr, inline.stderr


def test_verify_without_a_public_key_says_to_export_the_tokens(
    local_project: Project, token: Token, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PIN_ENV, PIN)
    _project_with(local_project, token, token.uri())
    made = local_project.trainops("release", "create", "step-2", "-o", "json")
    assert made.code == 0, made.stderr
    doc = yaml.safe_load(local_project.manifest.read_text())
    del doc["spec"]["release"]["signing"]["publicKey"]
    local_project.manifest.write_text(yaml.safe_dump(doc))
    out = local_project.trainops("release", "verify", json.loads(made.stdout)["ref"])
    assert out.code == 3 and "PKCS#11 token and names no publicKey" in out.stderr, out.stderr
    assert "--export-pubkey" in out.stderr
