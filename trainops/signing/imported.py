"""A model that arrives signed keeps its signature: `model.sig` becomes a referrer.

Model signing writes its signature to `model.sig` at the top of the model directory by
default, and Hub repositories that publish signed models ship it there. When `trainops hub
import` (from the Hub or --from-dir) or `trainops push DIR` finds that file, it is not made a layer of the model
(model signing itself leaves it out of what it signs): before anything is pushed, its
statement is read and must sign exactly the files being imported, with the same digests
(computed through the digest cache, so the push that follows hashes nothing again);
after the push it is attached to the model as a model signature referrer, byte for byte,
where `release verify`, `pull --verify-signature` and the serving init container check it
with the signer's public key like any signature trainops made.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.clock import now_utc
from trainops.errors import InputError, IntegrityError
from trainops.registry import media
from trainops.registry.artifact import FileEntry, scan_tree
from trainops.registry.context import Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.reference import Reference
from trainops.registry.store import push, resolve
from trainops.signing.records import push_record

if TYPE_CHECKING:
    from trainops.registry.artifact import ModelConfig
    from trainops.registry.context import ProgressSink
    from trainops.registry.lineage_data import Lineage
    from trainops.registry.retention.protect import Override
    from trainops.registry.store import PushResult


def split_signature(files: Sequence[FileEntry]) -> tuple[list[FileEntry], bytes | None]:
    """(the model's files, the content of its top-level model.sig if it has one)."""
    found = next((e for e in files if e.relpath == media.MODEL_SIGNATURE_FILE), None)
    if found is None:
        return list(files), None
    return [e for e in files if e is not found], found.path.read_bytes()


def check_signed_files(bundle: bytes, files: Sequence[FileEntry], *, where: str) -> None:
    """The signature's statement names exactly these files with their digests, or InputError
    naming each that differs (the signature itself is checked at verification, with a key)."""
    from trainops.signing.model_sig import check_bundle_shape, mismatches  # lazy: loads pydantic

    try:
        data = check_bundle_shape(bundle, where)
        statement = json.loads(base64.b64decode(data["dsseEnvelope"]["payload"]))
        if statement.get("predicateType") != media.MODEL_SIGNING_PREDICATE:
            raise InputError(f"{where}: predicate type {statement.get('predicateType')!r} is not model signing's")
        signed = {
            str(r["name"]): f"sha256:{r['digest']}"
            for r in statement["predicate"]["resources"]
            if r.get("algorithm") == "sha256"
        }
    except IntegrityError as err:
        raise InputError(err.message, hint="remove model.sig, or sign the model again") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputError(f"{where}: the signature's statement is malformed ({err})") from None
    cache = DigestCache()
    actual = {entry.relpath: cache.digest(entry.path)[0] for entry in files}
    wrong = mismatches(signed, actual)
    if wrong:
        raise InputError(f"{where} does not sign these files: {', '.join(wrong)}", hint="sign the model again")


def attach_signature(registries: Registries, *, ref: Reference, bundle: bytes, created: str) -> str:
    """Attach a pre-existing model signature to the pushed model; the referrer's ref."""
    from trainops.signing.model_sig import bundle_key_hint  # lazy: loads pydantic

    found = resolve(registries, ref=ref)
    record = push_record(
        registries,
        subject=found,
        content=bundle,
        predicate_type=media.MODEL_SIGNING_PREDICATE,
        key=bundle_key_hint(bundle),
        created=created,
    )
    return str(record)


def push_tree(
    registries: Registries,
    *,
    source: Path,
    ref: Reference,
    kind: str,
    lineage: Lineage | None,
    annotations: dict[str, str],
    model: ModelConfig | None,
    jobs: int | None,
    progress: ProgressSink,
    move_tag: bool,
    override: Override | None,
    dedup: str,
) -> PushResult:
    """`trainops push`: store.push, except that a directory's top-level model.sig is checked
    against the other files before anything is pushed, left out of the layers, and attached
    to the pushed artifact as its model signature (PushResult.signature)."""

    signed = source.is_dir() and (source / media.MODEL_SIGNATURE_FILE).is_file()
    files, bundle = split_signature(scan_tree(source)) if signed else ([], None)
    if bundle is not None:  # checked before anything is pushed
        check_signed_files(bundle, files, where=str(source / media.MODEL_SIGNATURE_FILE))
    pushed = push(
        registries,
        source=source,
        ref=ref,
        kind=kind,
        lineage=lineage,
        annotations=annotations,
        model=model,
        jobs=jobs,
        progress=progress,
        move_tag=move_tag,
        override=override,
        dedup=dedup,
        skip=(media.MODEL_SIGNATURE_FILE,) if bundle is not None else (),
    )
    if bundle is None:
        return pushed

    signature = attach_signature(registries, ref=pushed.ref, bundle=bundle, created=now_utc())
    return dataclasses.replace(pushed, signature=signature)
