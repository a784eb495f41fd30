"""Attaching a release's (or a checkpoint's) signature and provenance, once it is published.

The model signature is made from the layer digests (trainops.signing.model_sig), the
provenance from the lineage (trainops.signing.provenance); both are signed with the same
key and pushed as referrers (trainops.signing.records). A checkpoint (release.signing.checkpoints) gets provenance only,
signed when there is a key. Attaching is idempotent: a record
of the same predicate by the same key (or, unsigned, any provenance) is not made twice, so
re-running `release create` on a release that exists adds only what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.clock import now_utc
from trainops.errors import TrainopsError
from trainops.eval.report import read_report
from trainops.registry import media
from trainops.registry.artifact import safe_relpath
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, resolve
from trainops.signing.model_sig import model_statement
from trainops.signing.provenance import EvalFacts, provenance, statement_json
from trainops.signing.records import list_records, push_record
from trainops.signing.signer import Signer, open_signer

if TYPE_CHECKING:
    from trainops.manifest import Manifest


@dataclass(frozen=True)
class Attestation:
    """What was attached to an artifact (refs of the records; None where one already was)."""

    key: str | None  # the signer's fingerprint; None: provenance only, unsigned
    signature: str | None
    provenance: str | None


def artifact_files(found: Resolved) -> dict[str, str]:
    """{relpath: sha256:…} of an artifact's files, from its manifest."""
    parsed = found.parsed
    return {
        safe_relpath(parsed.file_path(layer, i), str(found.ref)): layer.digest for i, layer in enumerate(parsed.layers)
    }


def eval_facts(registries: Registries, found: Resolved) -> EvalFacts | None:
    """The eval report that let a release (its annotation), read from the registry."""

    text = found.parsed.annotations.get(media.A_RELEASE_EVAL)
    if not text:
        return None
    try:
        entry = read_report(registries, ref=registries.ref(text))
    except TrainopsError:  # pruned or unreachable: the lineage's evaluated-by digest still says which
        parent = next((p for p in found.parsed.lineage().parents if p.relation == "evaluated-by"), None)
        return EvalFacts(ref=text, digest=parent.digest, passed=True, datasets=[]) if parent else None
    return EvalFacts(ref=entry.ref, digest=entry.digest, passed=entry.report.passed, datasets=entry.report.datasets)


def checkpoint_attestation(manifest: Manifest | None) -> tuple[bool, Signer | None]:
    """(whether every checkpoint gets provenance, and the signer that signs it): with
    release.signing.checkpoints set, signed when release.signing has a key to sign with."""
    signing = manifest.pipeline.spec.release.signing if manifest and manifest.pipeline.spec.release else None
    if signing is None or not signing.checkpoints:
        return False, None
    if signing.key is None and signing.pkcs11 is None and not signing.keyless:
        return True, None

    return True, open_signer(signing, root=manifest.root if manifest else Path("."))


def checkpoint_attester(manifest: Manifest | None, registries: Registries) -> Callable[[Reference], None] | None:
    """What a checkpoint watcher calls after each push (WatchConfig.attest): SLSA provenance,
    signed when release.signing has a key; None when release.signing.checkpoints is off."""
    provenance, signer = checkpoint_attestation(manifest)
    if not provenance:
        return None

    def attest_checkpoint(ref: Reference) -> None:
        attest(registries, found=resolve(registries, ref=ref), signer=signer, created=now_utc())

    return attest_checkpoint


def attest(registries: Registries, *, found: Resolved, signer: Signer | None, created: str) -> Attestation:
    """Sign found's files (with a signer) and attach its SLSA provenance (signed with it, if any)."""

    files = artifact_files(found)
    existing = list_records(registries, subject=found)
    key = signer.public.fingerprint if signer is not None else None

    def have(predicate: str) -> bool:
        return any(r.predicate_type == predicate and (r.key == key or key is None) for r in existing)

    signature = None
    if signer is not None and found.parsed.kind == "model" and not have(media.MODEL_SIGNING_PREDICATE):
        version = found.parsed.annotations.get(media.A_VERSION) or found.ref.tag or found.manifest.digest
        name = f"{found.ref.repository.rsplit('/', 1)[-1]}:{version}"
        bundle = signer.sign(model_statement(name=name, files=files))
        signature = str(
            push_record(
                registries,
                subject=found,
                content=bundle,
                predicate_type=media.MODEL_SIGNING_PREDICATE,
                key=key,
                created=created,
            )
        )
    made = None
    if not have(media.SLSA_PROVENANCE):
        statement = provenance(
            ref=found.ref, parsed=found.parsed, files=files, evaluation=eval_facts(registries, found)
        )
        content = signer.sign(statement) if signer is not None else statement_json(statement)
        layer = media.SIGSTORE_BUNDLE if signer is not None else media.IN_TOTO
        made = str(
            push_record(
                registries,
                subject=found,
                content=content,
                predicate_type=media.SLSA_PROVENANCE,
                key=key,
                created=created,
                layer_type=layer,
            )
        )
    return Attestation(key=key, signature=signature, provenance=made)
