"""Bad keys at release (one line, exit 3, nothing pushed) and bad signature referrers at
verification (exit 7 with the reason, never a traceback)."""

from __future__ import annotations

import json

import pytest

from tests.eval.conftest import Project
from tests.eval.test_release import setup
from tests.signing.conftest import ec_key, other_keys, signed_release
from trainops.manifest.stages import SigningSpec
from trainops.registry import media
from trainops.registry.store import resolve
from trainops.signing.records import push_record
from trainops.signing.signer import Statement, open_signer


def _refused(project: Project, signing: dict[str, object], expected: str) -> None:
    setup(project, release={"signing": signing})
    assert project.trainops("eval", "run", "step-2").code == 0
    out = project.trainops("release", "create", "step-2")
    assert out.code == 3, out.stderr
    assert expected in out.last_error_line and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    listing = project.trainops("release", "ls", "-o", "json")
    assert json.loads(listing.stdout or "[]") == []  # nothing pushed


def test_a_missing_key(local_project: Project) -> None:
    _refused(local_project, {"key": "keys/absent.pem"}, "signing key")


@pytest.mark.parametrize("kind", ["rsa", "ed25519", "secp256k1"])
def test_unsupported_key_types(local_project: Project, kind: str) -> None:
    keys = local_project.root / "keys"
    keys.mkdir()
    path = other_keys(keys)[kind]
    _refused(local_project, {"key": f"keys/{path.name}"}, "P-256")


def test_a_passphrase_protected_key_without_or_with_a_wrong_passphrase(
    local_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = local_project.root / "keys"
    keys.mkdir()
    ec_key(keys, passphrase=b"s3cret")
    _refused(local_project, {"key": "keys/release.pem"}, "TRAINOPS_SIGNING_PASSPHRASE")
    monkeypatch.setenv("TRAINOPS_SIGNING_PASSPHRASE", "wrong")
    out = local_project.trainops("release", "create", "step-2")
    assert out.code == 3 and "does not open with the passphrase" in out.last_error_line
    monkeypatch.setenv("TRAINOPS_SIGNING_PASSPHRASE", "s3cret")
    assert local_project.trainops("release", "create", "step-2").code == 0


def test_keyless_is_named_but_refused_offline(local_project: Project) -> None:
    _refused(local_project, {"keyless": True}, "keyless Sigstore signing needs Fulcio")


def test_an_unreadable_key(local_project: Project) -> None:
    keys = local_project.root / "keys"
    keys.mkdir()
    (keys / "release.pem").mkdir()  # a directory where the file should be: unreadable as a key
    _refused(local_project, {"key": "keys/release.pem"}, "signing key")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"mediaType": "text/plain"}', "not a Sigstore bundle"),
    ],
)
def test_a_malformed_signature_referrer_fails_verification_with_the_reason(
    local_project: Project, content: bytes, reason: str
) -> None:
    result = signed_release(local_project)
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        # the good signature goes; a bad one takes its place
        regs.backend(found.ref).delete_manifest(found.ref.repository, result["signature"].split("@")[1])
        push_record(
            regs,
            subject=found,
            content=content,
            predicate_type=media.MODEL_SIGNING_PREDICATE,
            key=None,
            created="2026-01-01T00:00:00Z",
        )
    out = local_project.trainops("release", "verify", result["ref"])
    assert out.code == 7 and reason in out.last_error_line and "Traceback" not in out.stderr, out.stderr


def test_a_signature_with_a_wrong_predicate_type_fails(local_project: Project) -> None:
    result = signed_release(local_project)
    signer = open_signer(SigningSpec(key="keys/release.pem"), root=local_project.root)
    wrong = signer.sign(
        Statement(subjects=[("x", "00" * 32)], predicate_type="https://example.com/other/v1", predicate={})
    )
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        regs.backend(found.ref).delete_manifest(found.ref.repository, result["signature"].split("@")[1])
        push_record(
            regs,
            subject=found,
            content=wrong,
            predicate_type=media.MODEL_SIGNING_PREDICATE,
            key=signer.public.fingerprint,
            created="2026-01-01T00:00:00Z",
        )
    out = local_project.trainops("release", "verify", result["ref"])
    assert out.code == 7 and "Predicate type mismatch" in out.last_error_line, out.stderr


def test_provenance_that_contradicts_the_lineage_fails_naming_the_field(local_project: Project) -> None:
    from trainops.signing.attest import artifact_files, eval_facts
    from trainops.signing.provenance import provenance

    result = signed_release(local_project)
    signer = open_signer(SigningSpec(key="keys/release.pem"), root=local_project.root)
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        honest = provenance(
            ref=found.ref, parsed=found.parsed, files=artifact_files(found), evaluation=eval_facts(regs, found)
        )
        build = honest.predicate["buildDefinition"]
        for dep in build["resolvedDependencies"]:
            if dep["name"] == "checkpoint":
                dep["digest"] = {"sha256": "0" * 64}  # claims another checkpoint, properly signed
        lying = Statement(subjects=honest.subjects, predicate_type=honest.predicate_type, predicate=honest.predicate)
        regs.backend(found.ref).delete_manifest(found.ref.repository, result["provenance"].split("@")[1])
        push_record(
            regs,
            subject=found,
            content=signer.sign(lying),
            predicate_type=media.SLSA_PROVENANCE,
            key=signer.public.fingerprint,
            created="2026-01-01T00:00:00Z",
        )
    out = local_project.trainops("release", "verify", result["ref"])
    assert out.code == 7 and "its checkpoint dependency differs from the lineage" in out.last_error_line, out.stderr
