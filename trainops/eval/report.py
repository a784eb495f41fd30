"""The eval report: an artifact whose OCI `subject` is the checkpoint it evaluated.

A report is pushed into the checkpoint's own repository (referrers are per repository),
untagged: the checkpoint's referrers list it (the OCI referrers API, or the referrers tag
schema on registries without it). Its one layer is the report JSON
(application/vnd.trainops.eval.report.v1+json); its config blob and annotations carry the
lineage (parent: the checkpoint, relation `evaluated`) and the verdict. See registry/SPEC.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainops.errors import IntegrityError, NotFoundError
from trainops.registry import media
from trainops.registry.artifact import build_manifest, canonical_json, config_blob
from trainops.registry.backends.base import Descriptor
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.records import record_file
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved, bytes_source, leased, resolve, upload_if_missing
from trainops.serialize import FLATTEN

REPORT_MEDIA_TYPE = media.EVAL_REPORT
REPORT_FILE = "eval-report.json"
MAX_REPORT = 16 * 1024 * 1024


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ReportGate(_Model):
    metric: str
    op: str
    value: float
    actual: float | None
    passed: bool


class EvalReport(_Model):
    """The report JSON: what was evaluated, how, the metrics, the gates and the verdict."""

    schema_version: Literal[1] = Field(1, alias="schemaVersion")
    pipeline: str
    environment: str | None = None
    checkpoint: str = Field(description="The evaluated checkpoint, ref@sha256:….")
    command: list[str]
    image: str | None = Field(None, description="The image the eval ran in (ref@sha256:…), when known.")
    datasets: list[str] = Field(default_factory=list)
    metrics: dict[str, float]
    gates: list[ReportGate]
    passed: bool
    started: str
    ended: str


@dataclass(frozen=True)
class EvalEntry:
    """A report of a checkpoint as listed: where it is, and what it says."""

    ref: str  # repository@sha256:… of the report
    digest: str
    report: EvalReport = field(metadata=FLATTEN)  # in JSON: the report's fields beside ref and digest


def push_report(registries: Registries, *, checkpoint: Resolved, report: EvalReport, lineage: Lineage) -> Reference:
    """Push the report beside the checkpoint with the checkpoint as subject; its pinned ref."""
    repo = checkpoint.ref.with_tag(None).with_digest(None)
    backend = registries.backend(repo)
    data = canonical_json(report.model_dump(by_alias=True))
    blob = bytes_source(data)
    with leased(backend, repo.repository):  # gc keeps the report's blobs until the manifest names them
        upload_if_missing(backend, repo.repository, blob, lambda _n: None)
        layer = Descriptor(REPORT_MEDIA_TYPE, blob.digest, blob.size, {media.A_TITLE: REPORT_FILE})
        config_bytes, config_type = config_blob("eval", report.ended, lineage, [layer])
        config = bytes_source(config_bytes)
        upload_if_missing(backend, repo.repository, config, lambda _n: None)
        manifest = build_manifest(
            kind="eval",
            config=Descriptor(config_type, config.digest, config.size),
            layers=[layer],
            created=report.ended,
            lineage=lineage,
            annotations={
                media.A_EVAL_PASSED: "true" if report.passed else "false",
                media.A_EVAL_CHECKPOINT: report.checkpoint,
            },
            subject=Descriptor(
                checkpoint.manifest.media_type, checkpoint.manifest.digest, len(checkpoint.manifest.data)
            ),
        )
        backend.put_manifest(repo.repository, manifest)
    return repo.with_digest(manifest.digest)


def read_report(registries: Registries, *, ref: Reference) -> EvalEntry:
    """The report an eval artifact holds (its one layer, size-capped and digest-checked)."""
    found = resolve(registries, ref=ref)
    if found.parsed.kind != "eval":
        raise NotFoundError(f"{ref} is a {found.parsed.kind}, not an eval report")
    data = record_file(registries, found=found, what="an eval report", limit=MAX_REPORT, media_type=REPORT_MEDIA_TYPE)
    try:
        report = EvalReport.model_validate(json.loads(data))
    except ValueError as err:
        raise IntegrityError(f"{found.ref}: the eval report is malformed: {str(err).splitlines()[0]}") from None
    pinned = found.ref.with_tag(None)
    return EvalEntry(ref=str(pinned), digest=found.manifest.digest, report=report)


def list_evals(registries: Registries, *, checkpoint: Reference) -> list[EvalEntry]:
    """The eval reports of a checkpoint (its referrers of the eval type), oldest first."""
    found = resolve(registries, ref=checkpoint)
    repo = found.ref.with_tag(None).with_digest(None)
    descriptors = registries.backend(repo).referrers(repo.repository, found.manifest.digest)
    entries = [
        read_report(registries, ref=repo.with_digest(d.digest))
        for d in descriptors
        if d.artifact_type == media.ARTIFACT_TYPES["eval"]
    ]
    return sorted(entries, key=lambda e: (e.report.ended, e.digest))
