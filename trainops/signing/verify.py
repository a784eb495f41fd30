"""Verifying a release: its model signature, its files, and its provenance against its lineage.

- The signature: a model signing bundle attached to the release that verifies with the
  public key, whose signed files are exactly the release's files with the same digests
  (each file that differs, is missing or is unsigned is named). Checked on the manifest
  alone, before a byte of the model is fetched: `pull --verify-signature` and the serving
  init container refuse before they copy anything.
- The files: pulled, every byte checked against its layer digest (a blob replaced in the
  registry fails there, naming the file). With both, the files on disk are the signed ones.
- The provenance: an SLSA v1 statement attached to the release, its DSSE signature checked
  with the same key, whose subject and dependencies are what the release's lineage says.
Any failure is an IntegrityError (exit 7) with every reason found; nothing is a traceback.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.errors import GateFailedError, IntegrityError
from trainops.registry import media
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.pulling import pull
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, resolve
from trainops.signing.attest import artifact_files, eval_facts
from trainops.signing.keys import PublicKey, verification_key
from trainops.signing.model_sig import mismatches, verified_files
from trainops.signing.provenance import dependency_text, differences, open_envelope, parse_statement, provenance
from trainops.signing.records import Record, list_records

if TYPE_CHECKING:
    from trainops.manifest.stages import SigningSpec
    from trainops.registry.pulling import PullResult


@dataclass(frozen=True)
class ProvenanceSummary:
    """What a release's provenance says: builder, build type, dependencies, forced reason."""

    ref: str
    signed_by: str | None
    builder: str | None
    build_type: str | None
    forced: dict[str, Any] | None
    dependencies: list[str]  # "name uri"


@dataclass(frozen=True)
class VerifyResult:
    ref: str
    digest: str
    key: str  # the fingerprint that verified
    signature: str  # ref of the signature record that verified
    files: list[str]
    pulled: bool  # the files were pulled and every byte checked against its digest
    provenance: ProvenanceSummary | None
    problems: list[str] = field(default_factory=list)


def _bad(found: Resolved, problems: list[str]) -> IntegrityError:
    return IntegrityError(
        f"{found.ref}: {'; '.join(problems)}",
        hint="do not serve it; re-release it from its checkpoint, or check which key signed it",
    )


def check_signature(registries: Registries, *, found: Resolved, public: PublicKey) -> Record:
    """The signature record that verifies found with public, or IntegrityError naming why none does."""
    records = [r for r in list_records(registries, subject=found) if r.predicate_type == media.MODEL_SIGNING_PREDICATE]
    if not records:
        raise _bad(found, ["it is not signed (no model signature is attached)"])
    actual = artifact_files(found)
    problems: list[str] = []
    for record in sorted(records, key=lambda r: r.key != public.fingerprint):  # the claimed key's first
        try:
            signed = verified_files(record.content, public=public, where=f"signature {record.ref}")
        except IntegrityError as err:
            problems.append(str(err))
            continue
        wrong = mismatches(signed, actual)
        if not wrong:
            return record
        problems.append(f"signature {record.ref}: " + ", ".join(wrong))
    raise _bad(found, problems)


def _summary(record: Record, statement: dict[str, Any]) -> ProvenanceSummary:
    predicate = statement.get("predicate") if isinstance(statement.get("predicate"), dict) else {}
    assert isinstance(predicate, dict)
    build = predicate.get("buildDefinition") or {}
    builder = (predicate.get("runDetails") or {}).get("builder") or {}
    deps = build.get("resolvedDependencies") or []
    return ProvenanceSummary(
        ref=record.ref,
        signed_by=record.key if record.media_type == media.SIGSTORE_BUNDLE else None,
        builder=builder.get("id"),
        build_type=build.get("buildType"),
        forced=(build.get("externalParameters") or {}).get("forced"),
        dependencies=[f"{d.get('name')} {dependency_text(d)}" for d in deps if isinstance(d, dict)],
    )


def read_provenance(record: Record, *, public: PublicKey | None) -> dict[str, Any]:
    where = f"provenance {record.ref}"
    if record.media_type == media.IN_TOTO:
        if public is not None:
            raise IntegrityError(f"{where}: the provenance is not signed")
        return parse_statement(record.content, where)
    return open_envelope(record.content, public=public, where=where)


def check_provenance(registries: Registries, *, found: Resolved, public: PublicKey) -> ProvenanceSummary:
    """The provenance signed by public that matches found's lineage, or IntegrityError why none does."""
    records = [r for r in list_records(registries, subject=found) if r.predicate_type == media.SLSA_PROVENANCE]
    if not records:
        raise _bad(found, ["it has no SLSA provenance"])
    expected = provenance(
        ref=found.ref, parsed=found.parsed, files=artifact_files(found), evaluation=eval_facts(registries, found)
    )
    problems: list[str] = []
    for record in sorted(records, key=lambda r: r.key != public.fingerprint):
        try:
            statement = read_provenance(record, public=public)
        except IntegrityError as err:
            problems.append(str(err))
            continue
        wrong = differences(statement, expected)
        if not wrong:
            return _summary(record, statement)
        problems.append(f"provenance {record.ref}: " + ", ".join(wrong))
    raise _bad(found, problems)


def verify_release(
    registries: Registries, *, ref: Reference, public: PublicKey, progress: ProgressSink | None = None
) -> VerifyResult:
    """Check a release's signature and provenance with public, and pull its files (verified)."""

    found = resolve(registries, ref=ref)
    if found.parsed.kind != "model" and found.parsed.artifact_type != media.MODEL_ARTIFACT:
        raise IntegrityError(f"{ref} is a {found.parsed.kind}, not a release", hint="verify a model release")
    pinned = found.ref.with_digest(found.manifest.digest)
    signature = check_signature(registries, found=found, public=public)
    summary = check_provenance(registries, found=found, public=public)
    with tempfile.TemporaryDirectory(prefix="trainops-verify-") as scratch:
        pulled = pull(registries, ref=pinned, dest=Path(scratch) / "model", progress=progress)
    return VerifyResult(
        ref=str(pinned),
        digest=found.manifest.digest,
        key=public.fingerprint,
        signature=signature.ref,
        files=pulled.files,
        pulled=True,
        provenance=summary,
    )


def pull_verified(
    registries: Registries,
    *,
    ref: Reference,
    dest: Path,
    public: PublicKey,
    jobs: int | None = None,
    progress: ProgressSink | None = None,
) -> PullResult:
    """Pull an artifact only if its model signature verifies with public: checked on the
    manifest first, so nothing reaches dest unless it is signed; then every byte pulled is
    checked against the (signed) layer digests."""

    found = resolve(registries, ref=ref)
    check_signature(registries, found=found, public=public)
    return pull(registries, ref=found.ref.with_digest(found.manifest.digest), dest=dest, jobs=jobs, progress=progress)


def require_signed(registries: Registries, *, release: str, spec: SigningSpec, root: Path) -> str:
    """release.signing.required at rollout start: the release's model signature must verify
    with the manifest's public key, else GateFailedError (exit 8) naming what failed. The
    fingerprint of the key that verified."""

    public = verification_key(spec, root=root)
    found = resolve(registries, ref=registries.ref(release))
    try:
        check_signature(registries, found=found, public=public)
    except IntegrityError as err:
        raise GateFailedError(
            f"release.signing.required refuses {err.message}",
            hint="serve a release signed with release.signing.key (trainops release create signs it)",
        ) from None
    return public.fingerprint
