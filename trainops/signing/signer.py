"""Signing in-toto statements into Sigstore bundles, in OpenSSF model signing's format.

Both what trainops signs — the model signature (model signing's predicate) and the SLSA
provenance — are in-toto statements v1 in a DSSE envelope (payload type
application/vnd.in-toto+json, ECDSA over the DSSE pre-authentication encoding, the hash by
curve size) in a Sigstore bundle v0.3 whose verification material is the public key's hint
(the SHA-256 of its PEM): what `model_signing sign key` writes, field for field.

With a key file trainops signs with cryptography itself rather than through model signing's
signer: loading `model_signing` (it imports sigstore, tuf, protobuf models) takes 1–2 s,
which alone is more than 10 % of `release create` for a release assembled in the registry
(measured in bench/signing.py); the bundle is the same, and the tests verify every bundle
trainops makes with model signing's own verifier and CLI. A PKCS#11 key goes through model
signing's PKCS#11 signer (the token signs; there the import is the smaller cost).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import InputError
from trainops.manifest.stages import SigningSpec
from trainops.registry import media
from trainops.signing.keys import KEYLESS_REFUSED, PublicKey, ecdsa_hash, load_private_key, public_key_of
from trainops.signing.pkcs11 import open_token

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


@dataclass(frozen=True)
class Statement:
    """An in-toto statement v1 to sign: subjects, a predicate type and the predicate."""

    subjects: list[tuple[str, str]]  # (name, sha256 hex)
    predicate_type: str
    predicate: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": name, "digest": {"sha256": hexdigest}} for name, hexdigest in self.subjects],
            "predicateType": self.predicate_type,
            "predicate": self.predicate,
        }


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(payload), payload)


def bundle(*, payload: bytes, signature: bytes, public: PublicKey) -> bytes:
    """A Sigstore bundle v0.3 with a DSSE envelope, as model signing writes for a key."""
    body = {
        "mediaType": media.SIGSTORE_BUNDLE,
        "verificationMaterial": {"publicKey": {"hint": public.hint}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": media.IN_TOTO,
            "signatures": [{"sig": base64.b64encode(signature).decode(), "keyid": ""}],
        },
    }
    return json.dumps(body, indent=2).encode()


class _Payload:
    """What model signing's signers sign: an object whose `statement.pb` is the statement."""

    def __init__(self, statement: Any) -> None:
        self.statement = statement


@dataclass(frozen=True)
class Signer:
    """A loaded signing key: its public half, and the private key or the token's signer."""

    public: PublicKey
    key: Any = None  # cryptography's EllipticCurvePrivateKey (a key file)
    token: Any = None  # model signing's PKCS#11 signer

    def sign(self, statement: Statement) -> bytes:
        """The Sigstore bundle (JSON bytes) of the statement, signed."""
        if self.token is not None:
            return _token_sign(self.token, statement)
        from cryptography.hazmat.primitives.asymmetric import ec  # lazy: loads cryptography

        payload = json.dumps(statement.as_json(), indent=2, sort_keys=True).encode()
        signature = self.key.sign(pae(media.IN_TOTO, payload), ec.ECDSA(ecdsa_hash(self.key)))
        return bundle(payload=payload, signature=signature, public=self.public)


def _token_sign(token: Any, statement: Statement) -> bytes:
    # lazy: loads in_toto_attestation
    from in_toto_attestation.v1 import statement as intoto  # type: ignore[import-untyped]

    subjects = [intoto.ResourceDescriptor(name=n, digest={"sha256": h}).pb for n, h in statement.subjects]
    built = intoto.Statement(subjects=subjects, predicate_type=statement.predicate_type, predicate=statement.predicate)
    return str(token.sign(_Payload(built)).bundle.to_json()).encode()


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
    return Signer(public=private.public, key=private.key)


def _pkcs11_signer(uri: str) -> Signer:
    token, public = open_token(uri)
    return Signer(public=public_key_of(public, uri), token=token)
