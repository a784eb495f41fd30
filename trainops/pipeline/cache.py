"""Stage records: a stage's key and the artifacts it produced, stored in the registry.

A stage that ran is recorded as a small artifact (kind `other`) in the repository
`<registry>/<pipeline>/stages`, tagged `<stage>-<key hex>`. Its annotations carry the key
(`dev.trainops.stage.key`), the stage (`dev.trainops.stage.name`) and its outputs
(`dev.trainops.stage.outputs`, canonical JSON); its lineage lists the outputs as parents,
so a lineage walk from the record reaches them. Finding a stage's output for a key is one
manifest read; the outputs are then checked to still exist (retention may have removed a
checkpoint), else the stage runs again. The record is written after its outputs, so an
interrupted run never leaves a record that names a missing or half-written artifact.
See registry/SPEC.md, "Stage records".
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import NotFoundError
from trainops.manifest import Manifest
from trainops.pipeline.keys import key_hex
from trainops.pipeline.stage import Output
from trainops.registry import media
from trainops.registry.artifact import canonical_json, parse_manifest
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage, Parent
from trainops.registry.reference import Reference
from trainops.serialize import to_data

A_STAGE_KEY = media.A_STAGE_KEY
A_STAGE_NAME = "dev.trainops.stage.name"
A_STAGE_OUTPUTS = "dev.trainops.stage.outputs"
A_STAGE_INPUTS = "dev.trainops.stage.inputs"
LATEST_SUFFIX = "-latest"
RECORD_FILE = "stage.json"


@dataclass(frozen=True)
class StageRecord:
    stage: str
    key: str
    outputs: list[Output]
    ref: str  # where the record is (pinned)


def records_repository(manifest: Manifest, registries: Registries) -> Reference:
    spec = manifest.pipeline.spec
    return registries.ref(spec.repository(manifest.pipeline.metadata.name, "stages"))


def record_tag(stage: str, key: str) -> str:
    return f"{stage}-{key_hex(key)}"


def _outputs(raw: str | None) -> list[Output] | None:
    try:
        items = json.loads(raw or "")
        return [Output(name=str(i["name"]), digest=str(i["digest"]), ref=i.get("ref")) for i in items]
    except (ValueError, KeyError, TypeError):
        return None


def _present(registries: Registries, output: Output) -> bool:
    if output.ref is None:
        return True  # a digest of something that is not an artifact (the run environment)
    ref = registries.ref(output.ref)
    try:
        registries.backend(ref).get_manifest(ref.repository, output.digest)
    except NotFoundError:
        return False
    return True


def lookup(registries: Registries, *, repository: Reference, stage: str, key: str) -> StageRecord | None:
    """The record of this stage for this key, if it exists and every output it names is still there."""
    backend = registries.backend(repository)
    try:
        data = backend.get_manifest(repository.repository, record_tag(stage, key))
    except NotFoundError:
        return None
    parsed = parse_manifest(data)
    if parsed.annotations.get(A_STAGE_KEY) != key:
        return None
    outputs = _outputs(parsed.annotations.get(A_STAGE_OUTPUTS))
    if outputs is None or not all(_present(registries, o) for o in outputs):
        return None
    ref = repository.with_tag(record_tag(stage, key)).with_digest(data.digest)
    return StageRecord(stage=stage, key=key, outputs=outputs, ref=str(ref))


def save(
    registries: Registries,
    *,
    repository: Reference,
    stage: str,
    key: str,
    outputs: list[Output],
    inputs: dict[str, str],
    lineage: Lineage,
) -> StageRecord:
    """Push the record of a stage that finished (after its outputs are in the registry)."""
    from trainops.registry.store import push, tag  # lazy: loads sqlite3

    body = [to_data(o) for o in outputs]
    parents = [Parent(digest=o.digest, ref=o.ref, relation="parent") for o in outputs if o.ref]
    line = lineage.replace(parents=parents)
    annotations = {
        A_STAGE_KEY: key,
        A_STAGE_NAME: stage,
        A_STAGE_OUTPUTS: canonical_json(body).decode(),
        A_STAGE_INPUTS: canonical_json(inputs).decode(),
    }
    ref = repository.with_tag(record_tag(stage, key))
    with tempfile.TemporaryDirectory(prefix="trainops-stage-") as tmp:
        path = Path(tmp) / RECORD_FILE
        path.write_bytes(canonical_json({"stage": stage, "key": key, "outputs": body}))
        result = push(registries, source=path, ref=ref, kind="other", lineage=line, annotations=annotations)
    tag(registries, src=result.ref, dst=repository.with_tag(stage + LATEST_SUFFIX))
    return StageRecord(stage=stage, key=key, outputs=outputs, ref=str(result.ref))


def explain(registries: Registries, *, repository: Reference, stage: str, inputs: dict[str, str]) -> str:
    """Why a stage runs: what differs from its last recorded run, or that it has none."""
    try:
        data = registries.backend(repository).get_manifest(repository.repository, stage + LATEST_SUFFIX)
    except NotFoundError:
        return "never ran: no record in the registry"
    try:
        before = json.loads(parse_manifest(data).annotations.get(A_STAGE_INPUTS) or "{}")
    except ValueError:
        before = {}
    changed = sorted(k for k in set(before) | set(inputs) if before.get(k) != inputs.get(k))
    if not changed:
        return "its last output is gone from the registry (pruned or removed)"
    return "changed: " + ", ".join(changed)


def portable(registries: Registries, output: Output) -> Output:
    """The output with its reference relative to spec.registry when it lives there: a
    file:// registry's absolute path would tie the record to this checkout."""
    if output.ref is None or not registries.default_registry:
        return output
    root = registries.root().url.rstrip("/") + "/"
    text = str(registries.ref(output.ref))
    return Output(output.name, output.digest, text[len(root) :] if text.startswith(root) else text)
