"""The model signature in OpenSSF model signing's format, made from digests trainops has.

Model signing's `files` serialization records, for every file, the SHA-256 of its content:
exactly a release layer's digest. So trainops builds the signed manifest from the release
manifest's layers and hashes nothing again — signing a 1 GiB release costs one ECDSA
signature, not a second read of a gigabyte. The statement (subject: the model's name and
the SHA-256 over all file digests in path order; predicate: the serialization and one
resource per file) is the one model signing's `Payload` builds (a test compares them), so
the `model_signing` CLI verifies the bundle against the pulled files, and trainops verifies
bundles the CLI made.
Verification goes through model signing's verifier, then compares the signed digests with
the release's files, naming each file that differs, is missing or was not signed.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from trainops.errors import IntegrityError
from trainops.registry import media
from trainops.signing.keys import PublicKey, require_model_signing
from trainops.signing.signer import Statement

# What `model_signing sign` leaves out of a directory by default; recorded the same way so a
# verifier hashing a pulled directory leaves the same paths out
IGNORED = ("model.sig", ".github", ".gitignore", ".gitattributes", ".git")


def model_statement(*, name: str, files: dict[str, str]) -> Statement:
    """Model signing's statement of files {relpath: sha256:hex}: subject the model's name and
    the SHA-256 over every file's raw digest in path order; predicate the `files`
    serialization and one resource per file (what model_signing's Payload builds)."""
    ordered = sorted(files.items())
    root = hashlib.sha256(b"".join(bytes.fromhex(digest.removeprefix("sha256:")) for _, digest in ordered))
    predicate = {
        "serialization": {
            "method": "files",
            "hash_type": "sha256",
            "allow_symlinks": False,
            "ignore_paths": list(IGNORED),
        },
        "resources": [
            {"name": rel, "algorithm": "sha256", "digest": digest.removeprefix("sha256:")} for rel, digest in ordered
        ],
    }
    return Statement(
        subjects=[(name, root.hexdigest())], predicate_type=media.MODEL_SIGNING_PREDICATE, predicate=predicate
    )


def _reason(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def bundle_key_hint(bundle: bytes) -> str | None:
    """The public key hint a bundle names (None when it names none or is not a bundle)."""
    try:
        hint = json.loads(bundle)["verificationMaterial"]["publicKey"]["hint"]
    except (ValueError, KeyError, TypeError):
        return None
    return f"sha256:{hint}" if isinstance(hint, str) and hint else None


def check_bundle_shape(bundle: bytes, where: str) -> dict[str, Any]:
    """The bundle as JSON; IntegrityError saying why it is not a Sigstore bundle with a DSSE envelope."""
    try:
        data = json.loads(bundle)
    except ValueError as err:
        raise IntegrityError(f"{where}: the signature is not valid JSON ({_reason(err)})") from None
    if not isinstance(data, dict) or data.get("mediaType") != media.SIGSTORE_BUNDLE:
        found = data.get("mediaType") if isinstance(data, dict) else type(data).__name__
        raise IntegrityError(f"{where}: not a Sigstore bundle v0.3 (mediaType {found!r})")
    if not isinstance(data.get("dsseEnvelope"), dict):
        raise IntegrityError(f"{where}: the bundle holds no DSSE envelope")
    return data


def verified_files(bundle: bytes, *, public: PublicKey, where: str) -> dict[str, str]:
    """The files {relpath: sha256:hex} the bundle signs, once model signing's verifier has
    checked the signature with `public`; IntegrityError with the reason otherwise."""
    check_bundle_shape(bundle, where)
    require_model_signing()
    from cryptography.exceptions import InvalidSignature  # lazy: loads cryptography
    from model_signing._signing import sign_ec_key, sign_sigstore_pb  # lazy: loads model_signing

    with tempfile.TemporaryDirectory(prefix="trainops-verify-") as scratch:
        key_path, sig_path = Path(scratch) / "key.pub", Path(scratch) / media.MODEL_SIGNATURE_FILE
        key_path.write_bytes(public.pem)
        sig_path.write_bytes(bundle)
        try:
            signature = sign_sigstore_pb.Signature.read(sig_path)
            manifest = sign_ec_key.Verifier(key_path).verify(signature)
        except InvalidSignature:
            raise IntegrityError(f"{where}: the signature does not verify with {public.fingerprint}") from None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
            raise IntegrityError(f"{where}: {_reason(err)}") from None
    if manifest.serialization_type.get("method") != "files":
        raise IntegrityError(f"{where}: signed by shards; trainops verifies per-file signatures only")
    out = {}
    for resource in manifest.resource_descriptors():
        if resource.digest.algorithm != "sha256":
            raise IntegrityError(
                f"{where}: {resource.identifier} is signed with {resource.digest.algorithm}, not sha256"
            )
        out[resource.identifier] = "sha256:" + resource.digest.digest_hex
    return out


def mismatches(signed: dict[str, str], actual: dict[str, str]) -> list[str]:
    """What differs between the signed files and the release's, one phrase per file."""
    problems = [
        f"{rel} is not the file that was signed"
        for rel in sorted(signed)
        if rel in actual and actual[rel] != signed[rel]
    ]
    problems += [f"{rel} was signed but is missing" for rel in sorted(set(signed) - set(actual))]
    problems += [f"{rel} is not signed" for rel in sorted(set(actual) - set(signed))]
    return problems
