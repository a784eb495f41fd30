"""cosign accepts trainops' provenance: `cosign verify-attestation --key` against a signed
release in the Distribution registry (the referrers tag schema), as cosign's own bundle
referrers are read. cosign comes from scripts/build-cosign.sh (built from its Go module)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.evaluate.conftest import Project, _project
from tests.signing.conftest import ec_key, signed_release

VERSION = "v2.6.1"


def _cosign() -> str:
    cache = Path(os.environ.get("TRAINOPS_KUBE_CACHE", "/var/cache/trainops-kube"))
    found = Path(os.environ.get("TRAINOPS_COSIGN", cache / "bin" / f"cosign-{VERSION}"))
    if not found.is_file():
        pytest.fail(f"cosign is not built: run scripts/build-cosign.sh (it makes {found})")
    return str(found)


def _verify(cosign: str, image: str, key: Path) -> subprocess.CompletedProcess[str]:
    command = [
        cosign,
        "verify-attestation",
        "--key",
        str(key),
        "--type",
        "https://slsa.dev/provenance/v1",
        "--insecure-ignore-tlog=true",
        "--new-bundle-format",
        "--allow-http-registry",
        image,
    ]
    env = {**os.environ, "HOME": str(key.parent), "SIGSTORE_NO_CACHE": "true", "TUF_ROOT": str(key.parent / "tuf")}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_cosign_verify_attestation_accepts_trainops_provenance(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cosign = _cosign()
    project: Project = _project("oci", request, tmp_path)
    result = signed_release(project)
    repository, digest = result["ref"].removeprefix("oci://").split("@")
    image = f"{repository.rsplit(':', 1)[0]}@{digest}"
    accepted = _verify(cosign, image, project.root / "keys/release.pub")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "https://slsa.dev/provenance/v1" in accepted.stdout
    other = ec_key(project.root / "keys", "other")[1]
    refused = _verify(cosign, image, other)
    assert refused.returncode != 0
