"""Signing in-toto statements into Sigstore bundles with model signing's own signers.

Both what trainops signs — the model signature (model signing's predicate) and the SLSA
provenance — are in-toto statements in a DSSE envelope in a Sigstore bundle v0.3, made by
model signing's signers (an EC key file, or a key in a PKCS#11 token), so the bundles are
byte-for-byte what the `model_signing` CLI writes. `model_signing` is imported here only,
when a release is signed (about a second on a quiet core; `trainops --help` never loads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import InputError
from trainops.signing.keys import KEYLESS_REFUSED, PublicKey, load_private_key, public_key_of, require_model_signing
from trainops.spec.stages import SigningSpec


@dataclass(frozen=True)
class Statement:
    """An in-toto statement v1 to sign: one subject list, a predicate type and the predicate."""

    subjects: list[tuple[str, str]]  # (name, sha256 hex)
    predicate_type: str
    predicate: dict[str, Any]


class _Payload:
    """What model signing's signers sign: an object whose `statement.pb` is the statement."""

    def __init__(self, statement: Any) -> None:
        self.statement = statement


@dataclass(frozen=True)
class Signer:
    """A loaded signing key: its public half, and model signing's signer for it."""

    public: PublicKey
    impl: Any

    def sign(self, statement: Statement) -> bytes:
        """The Sigstore bundle (JSON bytes) of the statement, signed."""
        from in_toto_attestation.v1 import statement as intoto  # type: ignore[import-untyped]

        subjects = [
            intoto.ResourceDescriptor(name=name, digest={"sha256": hexdigest}).pb
            for name, hexdigest in statement.subjects
        ]
        built = intoto.Statement(
            subjects=subjects, predicate_type=statement.predicate_type, predicate=statement.predicate
        )
        signature = self.impl.sign(_Payload(built))
        return str(signature.bundle.to_json()).encode()

    def sign_payload(self, payload: Any) -> bytes:
        """The bundle of a model signing Payload (the model signature itself)."""
        return str(self.impl.sign(payload).bundle.to_json()).encode()


def open_signer(spec: SigningSpec, *, root: Path) -> Signer:
    """The signer release.signing names, loaded now: a bad key fails before anything is pushed."""
    if spec.keyless:
        raise InputError(
            f"release.signing.keyless: {KEYLESS_REFUSED}",
            hint="sign with release.signing.key (a PEM EC key file) or release.signing.pkcs11",
        )
    if spec.pkcs11 is not None:
        return _pkcs11_signer(spec.pkcs11)
    if spec.key is None:
        raise InputError(
            "release.signing has no key to sign with (publicKey only verifies)", hint="set release.signing.key"
        )
    private = load_private_key(root / spec.key)
    require_model_signing()
    from model_signing._signing import sign_ec_key

    # model signing's annotation says str, but the password goes to cryptography, which takes bytes
    impl = sign_ec_key.Signer(private.path, password=private.passphrase)  # type: ignore[arg-type]
    return Signer(public=private.public, impl=impl)


def _pkcs11_signer(uri: str) -> Signer:
    try:
        import PyKCS11  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        raise InputError(
            f"release.signing.pkcs11 {uri}: PKCS#11 signing needs the PyKCS11 package",
            hint="pip install 'model-signing[pkcs11]'",
        ) from None
    from model_signing._signing import sign_pkcs11

    try:
        impl = sign_pkcs11.Signer(uri)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"release.signing.pkcs11 {uri}: {first}", hint="check the token, PIN and key label") from None
    return Signer(public=public_key_of(impl._public_key, uri), impl=impl)
