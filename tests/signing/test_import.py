"""A model signed with the `model_signing` CLI and imported with `hub import --from-dir`
keeps its signature: model.sig is not a layer but a referrer, which verifies with the
signer's key on pull; a model.sig that does not sign the files is refused before a push."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.signing.conftest import ec_key
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.store import resolve
from trainops.signing.records import list_records
from trainops_testing.cli import run


def _signed_model(tmp_path: Path) -> tuple[Path, Path]:
    model = tmp_path / "snapshot"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "tiny"}')
    (model / "tokenizer.json").write_text("{}")
    private, public = ec_key(tmp_path)
    cli = str(Path(sys.executable).parent / "model_signing")
    done = subprocess.run(
        [cli, "sign", "key", "--private_key", str(private), "--signature", str(model / "model.sig"), str(model)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return model, public


def test_an_imported_signed_model_keeps_and_verifies_its_signature(tmp_path: Path) -> None:
    model, public = _signed_model(tmp_path)
    ref = f"file://{tmp_path}/reg/team/tiny:v1"
    out = run("hub", "import", "team/tiny", ref, "--from-dir", str(model), "-o", "json")
    assert out.code == 0, out.stderr
    imported = json.loads(out.stdout)
    assert imported["signature"] and imported["files"] == 2  # model.sig is not a layer
    with Registries(default_registry=None, base_dir=tmp_path) as regs:
        found = resolve(regs, ref=regs.ref(ref))
        records = list_records(regs, subject=found)
    assert [r.predicate_type for r in records] == [media.MODEL_SIGNING_PREDICATE]
    assert records[0].content == (model / "model.sig").read_bytes()  # byte for byte
    pulled = run("pull", ref, str(tmp_path / "out"), "--verify-signature", "--key", str(public))
    assert pulled.code == 0, pulled.stderr
    other = ec_key(tmp_path, "other")[1]
    refused = run("pull", ref, str(tmp_path / "out2"), "--verify-signature", "--key", str(other))
    assert refused.code == 7 and "Key mismatch" in refused.last_error_line


def test_a_model_sig_that_does_not_sign_the_files_is_refused_before_a_push(tmp_path: Path) -> None:
    model, _ = _signed_model(tmp_path)
    (model / "tokenizer.json").write_text('{"changed": true}')
    ref = f"file://{tmp_path}/reg/team/tiny:v1"
    out = run("hub", "import", "team/tiny", ref, "--from-dir", str(model))
    assert out.code == 3 and "tokenizer.json is not the file that was signed" in out.last_error_line, out.stderr
    assert not (tmp_path / "reg").exists()


def test_a_pushed_signed_directory_keeps_and_verifies_its_signature(tmp_path: Path) -> None:
    model, public = _signed_model(tmp_path)
    ref = f"file://{tmp_path}/reg/team/tiny:v1"
    out = run("push", str(model), ref, "--kind", "model", "-o", "json")
    assert out.code == 0, out.stderr
    pushed = json.loads(out.stdout)
    assert pushed["signature"] and pushed["files"] == 2  # model.sig is not a layer
    with Registries(default_registry=None, base_dir=tmp_path) as regs:
        found = resolve(regs, ref=regs.ref(ref))
        records = list_records(regs, subject=found)
    assert sorted(layer.annotations[media.A_FILEPATH] for layer in found.parsed.layers) == [
        "config.json",
        "tokenizer.json",
    ]
    assert [r.ref for r in records] == [pushed["signature"]]
    assert records[0].content == (model / "model.sig").read_bytes()  # byte for byte
    pulled = run("pull", ref, str(tmp_path / "out"), "--verify-signature", "--key", str(public))
    assert pulled.code == 0, pulled.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "tokenizer.json"]
    other = ec_key(tmp_path, "other")[1]
    refused = run("pull", ref, str(tmp_path / "out2"), "--verify-signature", "--key", str(other))
    assert refused.code == 7 and "Key mismatch" in refused.last_error_line
    text = run("push", str(model), ref)
    assert text.code == 0 and "kept model.sig as the signature" in text.stderr


def test_a_pushed_directory_whose_model_sig_does_not_sign_it_is_refused(tmp_path: Path) -> None:
    model, _ = _signed_model(tmp_path)
    (model / "extra.json").write_text("{}")  # a file the signature does not name
    ref = f"file://{tmp_path}/reg/team/tiny:v1"
    out = run("push", str(model), ref)
    assert out.code == 3 and "extra.json" in out.last_error_line and "model.sig" in out.last_error_line, out.stderr
    assert not (tmp_path / "reg").exists()
