"""`registry copy` carries an artifact's referrers to the destination, across the real
backends (file → oci → s3 → file): a release's model signature and SLSA provenance, so the
copy verifies there with the same key; a checkpoint's eval report. A second copy carries
nothing again."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.eval.conftest import Project
from tests.signing.conftest import signed_release
from trainops.registry import media
from trainops.registry.store import resolve

NEXT = {"file": "oci", "oci": "s3", "s3": "file"}


def _destination(project: Project, request: pytest.FixtureRequest) -> tuple[str, tuple[str, ...]]:
    """A repository URL on the backend after the project's, and the flags that reach it."""
    scheme = NEXT[project.scheme]
    if scheme == "oci":
        registry = request.getfixturevalue("registry")
        return f"oci://{registry.host}/c{uuid.uuid4().hex[:10]}/tiny-llm", ("--insecure",)
    if scheme == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}/copy/tiny-llm", ()
    return f"file://{project.root / 'mirror'}/tiny-llm", ()


def _kinds(project: Project, ref: str) -> list[tuple[str | None, str | None]]:
    with project.registries() as regs:
        found = resolve(regs, ref=regs.ref(ref))
        referrers = regs.backend(found.ref).referrers(found.ref.repository, found.manifest.digest)
    return sorted((d.artifact_type, d.annotations.get(media.A_BUNDLE_PREDICATE)) for d in referrers)


def test_a_copied_release_verifies_at_its_destination(project: Project, request: pytest.FixtureRequest) -> None:
    result = signed_release(project)
    dest, flags = _destination(project, request)
    copied = project.trainops("registry", "copy", result["ref"], f"{dest}:v1", *flags, "-o", "json")
    assert copied.code == 0, copied.stderr
    body = json.loads(copied.stdout)
    target = body["dst"]
    assert (
        _kinds(project, target)
        == _kinds(project, result["ref"])
        == [
            (media.SIGSTORE_BUNDLE, media.MODEL_SIGNING_PREDICATE),
            (media.SIGSTORE_BUNDLE, media.SLSA_PROVENANCE),
        ]
    )
    assert len(body["referrers"]) == 2

    out = project.trainops("release", "verify", target, "--key", "keys/release.pub", *flags, "-o", "json")
    assert out.code == 0, out.stderr
    verified = json.loads(out.stdout)
    assert verified["key"] == result["signedBy"] and verified["files"] == ["model.safetensors", "trainer_state.json"]
    pulled = project.trainops(
        "pull", target, str(project.root / "served"), "--verify-signature", "--key", "keys/release.pub", *flags
    )
    assert pulled.code == 0, pulled.stderr
    assert (project.root / "served/model.safetensors").is_file()

    again = project.trainops("registry", "copy", result["ref"], f"{dest}:v1", *flags, "-o", "json")
    assert again.code == 0 and json.loads(again.stdout)["referrers"] == []


def test_copy_text_says_what_it_carried(local_project: Project) -> None:
    result = signed_release(local_project)
    out = local_project.trainops("registry", "copy", result["ref"], f"file://{local_project.root / 'm'}/tiny:v1")
    assert out.code == 0, out.stderr
    assert out.stdout.rstrip().endswith("2 referrer(s) carried)"), out.stdout


def test_a_copied_checkpoint_keeps_its_eval_report(project: Project, request: pytest.FixtureRequest) -> None:
    signed_release(project)
    dest, flags = _destination(project, request)
    source = "tiny-llm/checkpoints:step-2"
    out = project.trainops("registry", "copy", source, f"{dest}-ckpt:step-2", *flags, "-o", "json")
    assert out.code == 0, out.stderr
    target = json.loads(out.stdout)["dst"]
    assert (media.ARTIFACT_TYPES["eval"], None) in _kinds(project, target)
    assert _kinds(project, target) == _kinds(project, source)
