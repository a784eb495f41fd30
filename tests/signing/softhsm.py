"""A real PKCS#11 token: Debian's SoftHSM 2, initialised in a temp dir (SOFTHSM2_CONF), with
an EC P-256 key pair generated inside it (the private key never leaves the token)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

MODULE = "/usr/lib/softhsm/libsofthsm2.so"
TOKEN, KEY, PIN, SO_PIN = "trainops-test", "release-key", "4711-test-pin", "0815-test-so-pin"

# Run in a child process: the PKCS#11 library is initialised once per process, and the
# tests' own process is where trainops opens it.
_GENERATE = """
import sys, PyKCS11
from cryptography.hazmat.primitives import serialization
from model_signing._signing.sign_pkcs11 import encode_ec_public_key
module, token, key, pin, out = sys.argv[1:]
lib = PyKCS11.PyKCS11Lib()
lib.load(module)
slot = next(s for s in lib.getSlotList(tokenPresent=True) if lib.getTokenInfo(s).label.strip() == token)
session = lib.openSession(slot, PyKCS11.CKF_SERIAL_SESSION | PyKCS11.CKF_RW_SESSION)
session.login(pin)
p256 = bytes.fromhex("06082a8648ce3d030107")
common = [(PyKCS11.CKA_TOKEN, PyKCS11.CK_TRUE), (PyKCS11.CKA_LABEL, key), (PyKCS11.CKA_ID, (1,))]
session.generateKeyPair(
    [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY), (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_EC),
     (PyKCS11.CKA_EC_PARAMS, p256), (PyKCS11.CKA_VERIFY, PyKCS11.CK_TRUE), *common],
    [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PRIVATE_KEY), (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_EC),
     (PyKCS11.CKA_SIGN, PyKCS11.CK_TRUE), (PyKCS11.CKA_PRIVATE, PyKCS11.CK_TRUE),
     (PyKCS11.CKA_SENSITIVE, PyKCS11.CK_TRUE), (PyKCS11.CKA_EXTRACTABLE, PyKCS11.CK_FALSE), *common],
    mecha=PyKCS11.MechanismECGENERATEKEYPAIR,
)
public = session.findObjects([(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY), (PyKCS11.CKA_LABEL, key)])[0]
pem = serialization.load_der_public_key(encode_ec_public_key(public)).public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
open(out, "wb").write(pem)
session.logout()
session.closeSession()
"""


@dataclass(frozen=True)
class Token:
    conf: Path
    public_key: Path  # the PEM public half of the key generated in the token

    def uri(self, query: str = "") -> str:
        base = f"pkcs11:token={TOKEN};object={KEY}?module-path={MODULE}"
        return f"{base}&{query}" if query else base


def make_token(directory: Path) -> Token:
    """A token initialised under directory and a key pair generated in it; fails with the
    install command when SoftHSM is missing."""
    util = shutil.which("softhsm2-util")
    if util is None or not Path(MODULE).is_file():
        pytest.fail("SoftHSM 2 is not installed: apt-get install -y softhsm2 (scripts/install-test-deps.sh)")
    (directory / "tokens").mkdir(parents=True)
    conf = directory / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {directory / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n")
    env = {**os.environ, "SOFTHSM2_CONF": str(conf)}
    init = [util, "--init-token", "--free", "--label", TOKEN, "--so-pin", SO_PIN, "--pin", PIN]
    done = subprocess.run(init, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    public = directory / "token.pub"
    args = [sys.executable, "-c", _GENERATE, MODULE, TOKEN, KEY, PIN, str(public)]
    made = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    return Token(conf, public)
