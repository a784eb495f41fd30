"""Signing and verification keys: loaded, checked and named before anything is pushed.

Model signing signs with elliptic-curve keys on P-256, P-384 or P-521 (what the Sigstore
bundle specification names); a key of another type is refused here with one line, as is a
missing or unreadable file and a passphrase-protected key without its passphrase. The
passphrase comes from the environment variable TRAINOPS_SIGNING_PASSPHRASE, never from
an argument (arguments are visible to every user of the machine in the process list).

A key is named by its fingerprint, `sha256:` and the SHA-256 of its PEM SubjectPublicKeyInfo:
the very value model signing writes into a bundle as the public key's hint.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.errors import InputError

if TYPE_CHECKING:
    from trainops.manifest.stages import SigningSpec

PASSPHRASE_ENV = "TRAINOPS_SIGNING_PASSPHRASE"
CURVES = ("secp256r1", "secp384r1", "secp521r1")
KEYLESS_REFUSED = "keyless Sigstore signing needs Fulcio, Rekor and an OIDC identity, which this machine cannot reach"


@dataclass(frozen=True)
class PublicKey:
    """A verification key: its PEM and fingerprint, and the key object for cryptography."""

    pem: bytes
    fingerprint: str
    source: str  # the file (or PKCS#11 URI) it came from, for messages
    key: Any  # cryptography's EllipticCurvePublicKey

    @property
    def hint(self) -> str:
        """The public key hint of a model signing bundle (the fingerprint's hex)."""
        return self.fingerprint.removeprefix("sha256:")


def require_model_signing() -> None:
    """model_signing importable, or one line saying what to install. model-signing 1.1.1
    imports OpenSSL (pyOpenSSL) without declaring it, so trainops depends on pyopenssl and
    checks it here."""
    try:
        import model_signing  # noqa: F401
        import OpenSSL  # noqa: F401
    except ImportError as err:
        raise InputError(
            f"signing needs the model-signing package ({err})", hint="pip install 'model-signing>=1.1' pyopenssl"
        ) from None


def ecdsa_hash(key: Any) -> Any:
    """The hash ECDSA uses with a key, by curve size, as model signing and Sigstore pair them."""
    from cryptography.hazmat.primitives import hashes  # lazy: loads cryptography

    return {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[key.curve.key_size]


def fingerprint(pem: bytes) -> str:
    return "sha256:" + hashlib.sha256(pem).hexdigest()


def _read(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise InputError(f"{what} {path} does not exist", hint="fix the path, or create the key pair")
    try:
        return path.read_bytes()
    except OSError as err:
        raise InputError(f"{what} {path} cannot be read: {err.strerror}", hint="check its permissions") from None


def _check_curve(key: Any, source: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec  # lazy: loads cryptography

    if not isinstance(key, ec.EllipticCurvePublicKey):
        kind = type(key).__name__.removeprefix("_").replace("PublicKey", "")
        raise InputError(
            f"{source} is a {kind} key; model signing signs with EC keys on P-256, P-384 or P-521",
            hint="make one with `openssl ecparam -genkey -name prime256v1 -noout -out release.pem`",
        )
    if key.curve.name not in CURVES:
        raise InputError(
            f"{source} is an EC key on {key.curve.name}; model signing supports P-256, P-384 and P-521 only",
            hint="make one with `openssl ecparam -genkey -name prime256v1 -noout -out release.pem`",
        )


def public_key_of(key: Any, source: str) -> PublicKey:
    from cryptography.hazmat.primitives import serialization  # lazy: loads cryptography

    _check_curve(key, source)
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return PublicKey(pem=pem, fingerprint=fingerprint(pem), source=source, key=key)


def load_public_key(path: Path) -> PublicKey:
    """A PEM public key file (or the public half of a PEM private key file)."""
    from cryptography.hazmat.primitives import serialization  # lazy: loads cryptography

    data = _read(path, "public key")
    if b"PRIVATE KEY" in data:
        return load_private_key(path).public
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise InputError(
            f"{path} is not a PEM public key", hint="give the public key file (BEGIN PUBLIC KEY)"
        ) from None
    return public_key_of(key, str(path))


@dataclass(frozen=True)
class PrivateKey:
    """A private key file that loads, with its passphrase (if any) and its public half."""

    path: Path
    passphrase: bytes | None
    public: PublicKey
    key: Any  # cryptography's EllipticCurvePrivateKey


def load_private_key(path: Path) -> PrivateKey:
    """The private key at path, decrypted with $TRAINOPS_SIGNING_PASSPHRASE when it needs one."""
    from cryptography.hazmat.primitives import serialization  # lazy: loads cryptography

    data = _read(path, "signing key")
    secret = os.environ.get(PASSPHRASE_ENV)
    passphrase = secret.encode() if secret else None
    try:
        key = serialization.load_pem_private_key(data, passphrase)
    except TypeError as err:  # a passphrase where none is needed, or none where one is
        if passphrase is None:
            raise InputError(
                f"signing key {path} is protected by a passphrase",
                hint=f"set the environment variable {PASSPHRASE_ENV} to it",
            ) from None
        raise InputError(f"signing key {path}: {err}", hint=f"unset {PASSPHRASE_ENV}") from None
    except ValueError:
        if passphrase is not None and b"ENCRYPTED" in data:
            raise InputError(
                f"signing key {path} does not open with the passphrase in {PASSPHRASE_ENV}",
                hint="set the key's passphrase",
            ) from None
        raise InputError(
            f"{path} is not a PEM private key", hint="give a PEM file (BEGIN PRIVATE KEY / EC PRIVATE KEY)"
        ) from None
    except Exception as err:
        raise InputError(f"signing key {path} cannot be used: {err}", hint="give an EC P-256 key") from None
    return PrivateKey(path=path, passphrase=passphrase, public=public_key_of(key.public_key(), str(path)), key=key)


def verification_key(spec: SigningSpec | None, *, root: Path, source: str = "release.signing") -> PublicKey:
    """The public key release.signing verifies with: publicKey, else the public half of key."""
    if spec is not None and spec.public_key is not None:
        return load_public_key(root / spec.public_key)
    if spec is not None and spec.key is not None:
        return load_private_key(root / spec.key).public
    if spec is not None and spec.pkcs11 is not None:
        raise InputError(
            f"no public key to verify with: {source} signs with a PKCS#11 token and names no publicKey",
            hint="export the token's public key as PEM (p11tool --export-pubkey, or pkcs11-tool "
            "--read-object --type pubkey then openssl) and set publicKey, or pass --key",
        )
    raise InputError(
        f"no public key to verify with: {source} names neither publicKey nor key",
        hint="pass --key PUBLIC.pem, or set release.signing.publicKey",
    )
