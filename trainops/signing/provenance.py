"""SLSA provenance v1 of a release (or a checkpoint), from the lineage trainops recorded.

An in-toto statement v1, predicate type https://slsa.dev/provenance/v1:
- subject: the artifact's files, each with its sha256 (the layer digest), and the artifact's
  manifest, named by its repository URL (what cosign and other OCI tools match);
- buildDefinition: buildType https://trainops.dev/provenance/release/v1 (or …/checkpoint/v1);
  externalParameters: the pipeline, the artifact's repository and version, and for a release
  made past a failing gate `forced: {reason, by}`; resolvedDependencies: the source (git
  repository and commit), the training image, the checkpoint released and the run that
  made it, the eval report and its verdict, and the datasets the eval named;
- runDetails: builder id https://trainops.dev/builder/cli with trainops' version, and the
  artifact's creation time.
Numbers other than metrics are strings (a PKCS#11 signature goes through protobuf's Struct,
which would turn 300 into 300.0).
Checking provenance against a release rebuilds what the release's lineage says and names
every field that differs.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from trainops import __version__
from trainops.errors import IntegrityError
from trainops.registry import media
from trainops.registry.artifact import ParsedManifest, canonical_json
from trainops.registry.reference import Reference
from trainops.signing.keys import PublicKey, ecdsa_hash
from trainops.signing.model_sig import check_bundle_shape
from trainops.signing.signer import STATEMENT_TYPE, Statement, pae

BUILDER = "https://trainops.dev/builder/cli"
BUILD_TYPE = "https://trainops.dev/provenance/{kind}/v1"


@dataclass(frozen=True)
class EvalFacts:
    """What provenance records of the eval report that let a release."""

    ref: str
    digest: str
    passed: bool
    datasets: list[str]


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def _dependencies(parsed: ParsedManifest, evaluation: EvalFacts | None) -> list[dict[str, Any]]:
    lineage = parsed.lineage()
    deps: list[dict[str, Any]] = []
    if lineage.git_commit:
        commit = lineage.git_commit.removesuffix("-dirty")
        source: dict[str, Any] = {"name": "source", "digest": {"gitCommit": commit}}
        if lineage.git_repo:  # a repository without a remote has no URI to name: the commit says it
            source["uri"] = f"git+{lineage.git_repo}@{commit}"
        deps.append(source)
    if lineage.image_digest:
        image = next((p for p in lineage.parents if p.relation == "image"), None)
        uri = f"{image.ref}@{image.digest}" if image else lineage.image_digest
        deps.append({"name": "image", "uri": uri, "digest": {"sha256": _hex(lineage.image_digest)}})
    for parent in lineage.parents:
        if parent.relation in ("released-from", "parent", "resumed-from", "derived-from", "dataset"):
            name = "checkpoint" if parent.relation == "released-from" else parent.relation
            dep: dict[str, Any] = {
                "name": name,
                "uri": f"{parent.ref}@{parent.digest}",
                "digest": {"sha256": _hex(parent.digest)},
            }
            if parent.relation == "released-from":
                run = {"runId": lineage.run_id, "step": None if lineage.step is None else str(lineage.step)}
                dep["annotations"] = {k: v for k, v in run.items() if v is not None}
            deps.append(dep)
    if evaluation is not None:
        deps.append(
            {
                "name": "eval-report",
                "uri": evaluation.ref,
                "digest": {"sha256": _hex(evaluation.digest)},
                "annotations": {"passed": "true" if evaluation.passed else "false", "metrics": dict(lineage.metrics)},
            }
        )
        deps += [{"name": "dataset", "uri": text} for text in evaluation.datasets]
    return deps


def provenance(
    *, ref: Reference, parsed: ParsedManifest, files: dict[str, str], evaluation: EvalFacts | None
) -> Statement:
    """The SLSA provenance statement of an artifact (a release or a checkpoint)."""

    lineage = parsed.lineage()
    external: dict[str, Any] = {"pipeline": lineage.pipeline, "repository": ref.repo_url}
    version = parsed.annotations.get(media.A_VERSION) or ref.tag
    if version:
        external["version"] = version
    if lineage.forced is not None:
        external["forced"] = {"reason": lineage.forced.reason, "by": lineage.forced.by}
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE.format(kind=parsed.kind),
            "externalParameters": {k: v for k, v in external.items() if v is not None},
            "resolvedDependencies": _dependencies(parsed, evaluation),
        },
        "runDetails": {
            "builder": {"id": BUILDER, "version": {"trainops": __version__}},
            "metadata": {"invocationId": lineage.run_id or parsed.digest, "finishedOn": parsed.created or ""},
        },
    }
    subjects = [(rel, _hex(digest)) for rel, digest in sorted(files.items())]
    subjects.append((ref.repo_url, _hex(parsed.digest)))  # the artifact itself, as cosign and OCI tools name it
    return Statement(subjects=subjects, predicate_type=media.SLSA_PROVENANCE, predicate=predicate)


def statement_json(statement: Statement) -> bytes:
    """An unsigned statement (provenance without a signing key), canonical JSON."""

    return canonical_json(statement.as_json())


def open_envelope(bundle: bytes, *, public: PublicKey | None, where: str) -> dict[str, Any]:
    """The statement a provenance bundle signs, its DSSE signature checked with `public`
    (None: not checked, for showing); an unsigned in-toto statement when the layer is one."""
    data = check_bundle_shape(bundle, where)
    envelope = data["dsseEnvelope"]
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        payload_type = str(envelope["payloadType"])
        signatures = envelope["signatures"]
        sig = base64.b64decode(signatures[0]["sig"], validate=True)
    except (KeyError, IndexError, TypeError, ValueError):
        raise IntegrityError(f"{where}: the DSSE envelope is malformed (payload, payloadType, signatures)") from None
    if public is not None:
        _check_dsse(public, pae(payload_type, payload), sig, where)
    if payload_type != media.IN_TOTO:
        raise IntegrityError(f"{where}: the envelope holds {payload_type}, not an in-toto statement")
    return parse_statement(payload, where)


def _check_dsse(public: PublicKey, encoded: bytes, sig: bytes, where: str) -> None:
    from cryptography.exceptions import InvalidSignature  # lazy: loads cryptography
    from cryptography.hazmat.primitives.asymmetric import ec  # lazy: loads cryptography

    try:
        public.key.verify(sig, encoded, ec.ECDSA(ecdsa_hash(public.key)))
    except InvalidSignature:
        raise IntegrityError(f"{where}: the provenance signature does not verify with {public.fingerprint}") from None


def parse_statement(payload: bytes, where: str) -> dict[str, Any]:
    """An in-toto statement v1 with the SLSA provenance predicate, or IntegrityError why not."""
    try:
        statement = json.loads(payload)
    except ValueError as err:
        raise IntegrityError(f"{where}: the provenance is not valid JSON ({err})") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise IntegrityError(f"{where}: not an in-toto statement v1")
    if statement.get("predicateType") != media.SLSA_PROVENANCE:
        raise IntegrityError(
            f"{where}: predicate type {statement.get('predicateType')!r}, expected {media.SLSA_PROVENANCE}"
        )
    return statement


def _deps_by_name(predicate: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    deps = predicate.get("buildDefinition", {}).get("resolvedDependencies", []) if isinstance(predicate, dict) else []
    for dep in deps if isinstance(deps, list) else []:
        if isinstance(dep, dict):
            out.setdefault(str(dep.get("name")), []).append(dep)
    return out


def dependency_text(dependency: dict[str, Any]) -> str:
    """A resolved dependency for people: its URI; one without (a commit of a repository with
    no remote): its digests (`gitCommit 3f…`)."""
    if dependency.get("uri"):
        return str(dependency["uri"])
    digest = dependency.get("digest") if isinstance(dependency.get("digest"), dict) else {}
    assert isinstance(digest, dict)
    return ", ".join(f"{key} {value}" for key, value in digest.items()) or "-"


def differences(found: dict[str, Any], expected: Statement) -> list[str]:
    """What the provenance says that the artifact's lineage does not, one phrase each."""
    problems = []
    subjects = {
        str(s.get("name")): str((s.get("digest") or {}).get("sha256"))
        for s in found.get("subject", [])
        if isinstance(s, dict)
    }

    def files(named: dict[str, str]) -> dict[str, str]:  # the artifact's own subject is named by URL
        return {name: digest for name, digest in named.items() if "://" not in name}

    if files(subjects) != files(dict(expected.subjects)):
        problems.append("its subject is not the artifact's files")
    if expected.subjects[-1][1] not in subjects.values():
        problems.append("its subject does not name the artifact's manifest")
    got, want = _deps_by_name(found.get("predicate")), _deps_by_name(expected.predicate)
    for name in sorted(set(got) | set(want)):
        digests = sorted(json.dumps(d.get("digest"), sort_keys=True) for d in got.get(name, []))
        if digests != sorted(json.dumps(d.get("digest"), sort_keys=True) for d in want.get(name, [])):
            problems.append(f"its {name} dependency differs from the lineage")
    external = found.get("predicate", {}).get("buildDefinition", {}).get("externalParameters", {})
    wanted_forced = expected.predicate["buildDefinition"]["externalParameters"].get("forced")
    if (external.get("forced") if isinstance(external, dict) else None) != wanted_forced:
        problems.append("its forced-release record differs from the lineage")
    return problems


def peek_statement(content: bytes, media_type: str) -> dict[str, Any] | None:
    """The statement a provenance record holds, unverified (for showing), or None."""
    try:
        if media_type == media.IN_TOTO:
            return parse_statement(content, "provenance")
        return open_envelope(content, public=None, where="provenance")
    except IntegrityError:
        return None
