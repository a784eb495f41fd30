"""Signing with a key that never leaves a PKCS#11 token (an HSM, a smart card, SoftHSM).

`release.signing.pkcs11` is an RFC 7512 URI naming the token and the key, as in
`pkcs11:token=release;object=release-key?module-name=softhsm2` (or `module-path=/abs/lib.so`).
The token signs through model signing's PKCS#11 signer (PyKCS11 underneath), so the bundle
is model signing's own; the public key is read from the token, and named by its fingerprint.

The PIN never sits in the manifest, which is committed to git: the URI's RFC 7512
`pin-source=file:/ABSOLUTE/PATH` names a file holding it (one trailing newline is dropped),
else it comes from the environment variable TRAINOPS_PKCS11_PIN; `pin-value` is refused
(the spec refuses it at load). It is handed to the token only, and scrubbed from any
message the token's library raises. `module-name` is looked for in model signing's module
directories and Debian's (/usr/lib/<multiarch>/pkcs11, /usr/lib/softhsm).
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trainops.errors import InputError
from trainops.signing.keys import require_model_signing

PIN_ENV = "TRAINOPS_PKCS11_PIN"
MODULE_DIRS = (
    "/usr/lib64/pkcs11/",
    "/usr/lib/pkcs11/",
    f"/usr/lib/{sysconfig.get_config_var('MULTIARCH') or 'x86_64-linux-gnu'}/pkcs11/",
    "/usr/lib/softhsm/",
)


def open_token(uri: str) -> tuple[Any, Any]:
    """(model signing's PKCS#11 signer logged in to the token, the key's cryptography public key)."""
    try:
        import PyKCS11  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        raise InputError(
            f"release.signing.pkcs11 {uri}: PKCS#11 signing needs the PyKCS11 package",
            hint="pip install 'trainops[pkcs11]' (or PyKCS11)",
        ) from None

    require_model_signing()
    from model_signing._signing import sign_pkcs11  # lazy: loads model_signing
    from model_signing._signing.pkcs11uri import Pkcs11URI  # lazy: loads model_signing

    parsed = Pkcs11URI()  # type: ignore[no-untyped-call]
    pin: str | None = None
    try:
        parsed.parse(uri)
        pin = _pin(parsed, uri)
        if pin is not None:
            parsed.remove_query_attribute("pin-source")
            parsed.set_query_attribute_unencoded("pin-value", pin.encode())
        token = sign_pkcs11.Signer(parsed.format(), module_paths=MODULE_DIRS)
    except InputError:
        raise
    except Exception as err:  # PyKCS11 and the URI parser raise their own kinds
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if pin:
            text = text.replace(pin, "***")
        raise InputError(f"release.signing.pkcs11 {uri}: {text}", hint=_hint(text)) from None
    return token, token.public_key()  # type: ignore[no-untyped-call]


def _pin(parsed: Any, uri: str) -> str | None:
    """The PIN: from the file pin-source names, else $TRAINOPS_PKCS11_PIN, else None."""
    if parsed.get_query_attribute("pin-value") is not None:
        raise InputError(
            f"release.signing.pkcs11 {uri}: a pin-value in the manifest would be committed to git",
            hint=f"use pin-source=file:/ABSOLUTE/PATH or the environment variable {PIN_ENV}",
        )
    source = parsed.get_query_attribute("pin-source")
    if source is None:
        return os.environ.get(PIN_ENV) or None
    where = urlparse(source)
    if where.scheme not in ("", "file") or not os.path.isabs(where.path):
        raise InputError(
            f"release.signing.pkcs11 {uri}: pin-source must be file:/ABSOLUTE/PATH",
            hint="name the PIN file by its path",
        )
    try:
        text = Path(where.path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(
            f"release.signing.pkcs11 {uri}: cannot read the PIN file {where.path}: {err.strerror}",
            hint="make the file readable by this user (and by no one else)",
        ) from None
    return text[:-1] if text.endswith("\n") else text


def _hint(text: str) -> str:
    if "PIN" in text:
        return f"check the PIN (pin-source=file:… in the URI, or ${PIN_ENV})"
    if "module" in text:
        return "name the token's library: module-path=/ABSOLUTE/lib.so or module-name=NAME in the URI"
    return "check the token label, the key's object label or id, and the PIN"
