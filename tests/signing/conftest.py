"""Projects with signing keys: real EC (and other) keys made with cryptography, a release
made by `trainops release create` on each backend, and helpers to tamper with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.eval.conftest import Project, _own_cache, _project  # noqa: F401 - fixtures shared
from tests.eval.test_release import released, setup


def write_key(directory: Path, name: str, key: Any, passphrase: bytes | None = None) -> tuple[Path, Path]:
    """key as PEM files NAME.pem (private) and NAME.pub (public) in directory."""
    algorithm = serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    private = directory / f"{name}.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, algorithm))
    public = directory / f"{name}.pub"
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def ec_key(
    directory: Path, name: str = "release", curve: Any = None, passphrase: bytes | None = None
) -> tuple[Path, Path]:
    return write_key(directory, name, ec.generate_private_key(curve or ec.SECP256R1()), passphrase)


def other_keys(directory: Path) -> dict[str, Path]:
    """Keys model signing does not take: RSA, Ed25519, EC on secp256k1."""
    return {
        "rsa": write_key(directory, "rsa", rsa.generate_private_key(public_exponent=65537, key_size=2048))[0],
        "ed25519": write_key(directory, "ed", ed25519.Ed25519PrivateKey.generate())[0],
        "secp256k1": ec_key(directory, "k1", ec.SECP256K1())[0],
    }


def signed_release(project: Project, *, signing: dict[str, Any] | None = None) -> dict[str, Any]:
    """A project with a key pair (keys/release.pem, .pub), an evaluated checkpoint, and
    release v1-step-2 created with release.signing; the `release create -o json` result."""
    keys = project.root / "keys"
    keys.mkdir(exist_ok=True)
    ec_key(keys)
    setup(project, release={"signing": signing or {"key": "keys/release.pem", "publicKey": "keys/release.pub"}})
    assert project.trainops("eval", "run", "step-2").code == 0
    return released(project)


@pytest.fixture(params=["file", "oci", "s3"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    yield _project(request.param, request, tmp_path)


@pytest.fixture
def local_project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    yield _project("file", request, tmp_path)
