"""cosign accepts what trainops signed, offline and key-based (no transparency log): `cosign
verify-attestation --key` finds trainops' SLSA provenance among the release's referrers in
the Distribution registry (the referrers tag schema) and checks it against the release's
digest; `cosign verify-blob-attestation` checks the provenance bundle against a pulled file.
Another key is refused by both. cosign (its pinned version in scripts/kube-versions.env) is one
of the cluster components scripts/install-test-deps.sh puts in the cache (trainops_testing/kube_bins.py)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.eval.conftest import Project, _project
from tests.signing.conftest import ec_key, signed_release
from trainops.registry import media
from trainops.registry.store import resolve
from trainops.signing.records import list_records
from trainops_testing.kube_bins import SKIP_ENV, binary
from trainops_testing.services import MissingDependency


def _cosign() -> str:
    if os.environ.get("TRAINOPS_COSIGN"):
        return os.environ["TRAINOPS_COSIGN"]
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the cluster components (cosign among them) are not installed here")
    try:
        return str(binary("cosign"))
    except MissingDependency as exc:
        pytest.fail(str(exc), pytrace=False)


# Sigstore's trusted root with no authority at all: with --key and no transparency log,
# cosign needs none, but its bundle verifier wants a trusted root, which it would otherwise
# fetch from Sigstore's TUF repository (unreachable offline, and not what a key trusts).
EMPTY_TRUSTED_ROOT = {
    "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    "tlogs": [],
    "certificateAuthorities": [],
    "ctlogs": [],
    "timestampAuthorities": [],
}


def _run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """cosign offline: its own HOME and TUF root, so it neither reads nor writes the user's."""
    root = home / "trusted_root.json"
    root.write_text(json.dumps(EMPTY_TRUSTED_ROOT))
    env = {**os.environ, "HOME": str(home), "SIGSTORE_NO_CACHE": "true", "TUF_ROOT": str(home / "tuf")}
    command = [_cosign(), *args[:1], "--trusted-root", str(root), *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def _verify_attestation(image: str, key: Path) -> subprocess.CompletedProcess[str]:
    return _run(
        "verify-attestation",
        "--key",
        str(key),
        "--type",
        media.SLSA_PROVENANCE,
        "--insecure-ignore-tlog=true",
        "--new-bundle-format",
        "--allow-http-registry",
        image,
        home=key.parent,
    )


def _verify_blob(bundle: Path, key: Path, blob: Path) -> subprocess.CompletedProcess[str]:
    return _run(
        "verify-blob-attestation",
        "--key",
        str(key),
        "--bundle",
        str(bundle),
        "--new-bundle-format",
        "--type",
        media.SLSA_PROVENANCE,
        "--insecure-ignore-tlog=true",
        str(blob),
        home=key.parent,
    )


@pytest.fixture
def signed(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Project, dict[str, str]]:
    project = _project("oci", request, tmp_path)
    return project, signed_release(project)


def test_cosign_verify_attestation_accepts_trainops_provenance(signed: tuple[Project, dict[str, str]]) -> None:
    project, result = signed
    repository, digest = result["ref"].removeprefix("oci://").split("@")
    image = f"{repository.rsplit(':', 1)[0]}@{digest}"
    accepted = _verify_attestation(image, project.root / "keys/release.pub")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    envelope = json.loads(accepted.stdout.splitlines()[0])  # what cosign verified, as it prints it
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicateType"] == media.SLSA_PROVENANCE
    assert f"sha256:{statement['subject'][-1]['digest']['sha256']}" == digest  # the release itself
    assert "verified against the specified public key" in accepted.stderr
    other = ec_key(project.root / "keys", "other")[1]
    refused = _verify_attestation(image, other)
    assert refused.returncode != 0 and "no matching attestations" in refused.stderr, refused.stderr


def test_cosign_verify_blob_attestation_checks_a_pulled_file(signed: tuple[Project, dict[str, str]]) -> None:
    project, result = signed
    pulled = project.trainops("pull", result["ref"], "served")
    assert pulled.code == 0, pulled.stderr
    with project.registries() as regs:
        records = list_records(regs, subject=resolve(regs, ref=regs.ref(result["ref"])))
    bundle = project.root / "provenance.sigstore.json"
    bundle.write_bytes(next(r.content for r in records if r.predicate_type == media.SLSA_PROVENANCE))
    weights, key = project.root / "served/model.safetensors", project.root / "keys/release.pub"
    accepted = _verify_blob(bundle, key, weights)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    tampered = project.root / "tampered.safetensors"
    tampered.write_bytes(weights.read_bytes() + b"\0")
    changed = _verify_blob(bundle, key, tampered)
    assert changed.returncode != 0 and "digest does not match" in changed.stderr, changed.stderr
    another = _verify_blob(bundle, ec_key(project.root / "keys", "other")[1], weights)
    assert another.returncode != 0 and "could not verify envelope" in another.stderr, another.stderr
