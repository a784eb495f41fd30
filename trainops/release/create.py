"""`trainops release create`: package a checkpoint that passed its gates as a ModelPack model.

The checkpoint (release.source, or the one named) must have a passing eval when
release.requireGates is set; `force` with a `reason` overrides, and the override, the reason
and who (git user, else $USER) go into the release's lineage and annotations. The files of
the checkpoint matching release.include and not release.exclude — after release.export
converted them, if set — become a ModelPack model (config: format, paramSize,
precision, architecture) in release.repository, tagged from release.tag; without an export
it is assembled from the checkpoint's blobs (trainops.release.package): mounted within one
registry, copied across registries, never the excluded files. Releases are
immutable: an existing tag with other files is refused (exit 5), the same files are the
same release. Lineage parents: the checkpoint (`released-from`), the eval (`evaluated-by`)
and the training image the checkpoint recorded (`image`), when it is in the image repository.
"""

from __future__ import annotations

import os
import string
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from trainops import clock
from trainops.clock import now_utc
from trainops.errors import GateFailedError, InputError, TrainopsError, UsageError
from trainops.manifest import Manifest
from trainops.manifest.stages import ReleaseSpec
from trainops.modelfiles.safetensors import ModelInfo, model_info
from trainops.registry import media
from trainops.registry.artifact import ModelConfig
from trainops.registry.chunks.index import is_chunked
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.lineage_data import Forced, Lineage, Parent
from trainops.registry.reference import TAG_RE, Reference
from trainops.registry.store import Resolved, assemble, push, resolve
from trainops.release.choose import Candidate, choose
from trainops.release.immutable import local_files, same_release
from trainops.release.package import exported_files, rebuilt_files, remote_info, select_files
from trainops.signing.attest import attest
from trainops.signing.signer import open_signer

if TYPE_CHECKING:
    from trainops.signing.signer import Signer


@dataclass(frozen=True)
class ReleaseResult:
    ref: str  # repository:tag@sha256:…
    digest: str
    checkpoint: str
    eval: str | None
    version: str
    created: bool  # False: the tag already held these files
    forced: Forced | None
    model: ModelInfo
    files: list[str]
    signed_by: str | None = None  # the signing key's fingerprint (release.signing)
    signature: str | None = None  # the model signature referrer attached now
    provenance: str | None = None  # the SLSA provenance referrer attached now


def release_spec(manifest: Manifest) -> ReleaseSpec:
    spec = manifest.pipeline.spec.release
    if spec is None:
        raise InputError(f"{manifest.path} has no release section", hint="add spec.release (source, tag)")
    return spec


def release_repository(manifest: Manifest, registries: Registries) -> Reference:
    spec = release_spec(manifest)
    text = manifest.pipeline.spec.repository(manifest.pipeline.metadata.name, "model", spec.repository)
    ref = registries.ref(text)
    if ref.tag or ref.digest:
        raise InputError(f"release.repository {text!r} names a tag or digest", hint="name the repository only")
    return ref


def create_release(
    *,
    manifest: Manifest,
    registries: Registries,
    checkpoint: str | None = None,
    version: str | None = None,
    force: bool = False,
    reason: str | None = None,
    who: str | None = None,
    progress: ProgressSink | None = None,
    command_stdout: int | IO[Any] | None = None,
) -> ReleaseResult:
    """Release a checkpoint as a model; see the module docstring."""
    spec = release_spec(manifest)
    if force and not (reason and reason.strip()):
        raise UsageError("--force needs --reason TEXT: the override and its reason are recorded in the lineage")
    gated = spec.require_gates and not force
    chosen = choose(registries, manifest=manifest, source=checkpoint or spec.source, gated=gated)
    if gated and chosen.passing is None:
        raise GateFailedError(
            f"{chosen.checkpoint.ref} has no passing eval: {chosen.why_not()}",
            hint="run `trainops eval run`, or release anyway with --force --reason TEXT",
        )
    forced = None
    if spec.require_gates and chosen.passing is None:
        forced = Forced(reason=str(reason).strip(), by=who or _who(manifest))
    tag = version or expand_tag(spec.tag, chosen.checkpoint)
    if not TAG_RE.match(tag):
        raise InputError(f"release tag {tag!r} is not a valid tag", hint="use letters, digits, '.', '_' and '-'")
    target = release_repository(manifest, registries).with_tag(tag)
    signer = None
    if spec.signing is not None:  # a bad key fails here, before anything is pushed
        signer = open_signer(spec.signing, root=manifest.root)
    result = _publish(manifest, spec, registries, chosen, forced, target, progress, command_stdout)
    return _attested(registries, result, signer)


def _attested(registries: Registries, result: ReleaseResult, signer: Signer | None) -> ReleaseResult:
    """The release signed (with release.signing) and its SLSA provenance attached (always)."""

    found = resolve(registries, ref=registries.ref(result.ref))
    made = attest(registries, found=found, signer=signer, created=now_utc())
    return replace(result, signed_by=made.key, signature=made.signature, provenance=made.provenance)


def _publish(
    manifest: Manifest,
    spec: ReleaseSpec,
    registries: Registries,
    chosen: Candidate,
    forced: Forced | None,
    target: Reference,
    progress: ProgressSink | None,
    command_stdout: int | IO[Any] | None,
) -> ReleaseResult:
    """Package the chosen checkpoint as target, unless target already holds these files."""
    tag = str(target.tag)
    ckpt = chosen.checkpoint
    lineage = _lineage(manifest, chosen, forced, image_parent(manifest, registries, ckpt.parsed.lineage().image_digest))
    notes = _annotations(spec, chosen, tag, forced)
    descriptor = {"name": manifest.pipeline.metadata.name, "version": tag}
    # a chunked checkpoint has no blob per file, a ModelPack model in tar layers (modctl's) no
    # raw blob per file: their files are pulled (rebuilt, unpacked), then pushed
    chunked = is_chunked(ckpt.parsed) or any(media.packing(layer.media_type) for layer in ckpt.parsed.layers)
    with tempfile.TemporaryDirectory(prefix="trainops-release-") as scratch:
        if spec.export:  # pulled, converted, pushed from here
            directory = exported_files(manifest, spec, registries, ckpt, Path(scratch), progress, command_stdout)
            info, files = model_info(directory), local_files(directory)
        elif chunked:
            directory = rebuilt_files(registries, ckpt, select_files(ckpt, spec), Path(scratch), progress)
            info, files = model_info(directory), local_files(directory)
        else:  # assembled in the registry from the checkpoint's blobs: nothing is downloaded
            selection = select_files(ckpt, spec)
            info, files = remote_info(registries, ckpt, selection), {rel: d.digest for rel, d in selection}
        existing = same_release(registries, target=target, files=files)
        if existing is not None:
            return _as_made(existing, _result(existing.ref, chosen, tag, False, None, info, files))
        model = ModelConfig(descriptor=descriptor, config=info.as_config())
        if spec.export or chunked:
            ref = push(
                registries,
                source=directory,
                ref=target,
                kind="model",
                lineage=lineage,
                annotations=notes,
                progress=progress,
                model=model,
                move_tag=False,  # a release tag is never moved, even by a writer that raced this one
            ).ref
        else:
            ref = assemble(
                registries,
                src=ckpt.ref,
                files=selection,
                ref=target,
                kind="model",
                created=ckpt.parsed.created or clock.iso(),
                lineage=lineage,
                annotations=notes,
                model=model,
                progress=progress,
                move_tag=False,
            ).ref
        return _result(ref, chosen, tag, True, forced, info, files)


def _result(
    ref: Reference,
    chosen: Candidate,
    tag: str,
    created: bool,
    forced: Forced | None,
    info: ModelInfo,
    files: dict[str, str],
) -> ReleaseResult:
    return ReleaseResult(
        ref=str(ref),
        digest=str(ref.digest),
        checkpoint=str(chosen.checkpoint.ref),
        eval=chosen.passing.ref if chosen.passing else None,
        version=tag,
        created=created,
        forced=forced,
        model=info,
        files=sorted(files),
    )


def _as_made(existing: Resolved, result: ReleaseResult) -> ReleaseResult:
    """The same files were released before: report that release as it was made."""
    notes = existing.parsed.annotations
    return replace(
        result,
        checkpoint=notes.get(media.A_RELEASE_CHECKPOINT, result.checkpoint),
        eval=notes.get(media.A_RELEASE_EVAL),
        forced=existing.parsed.lineage().forced,
    )


def expand_tag(template: str, checkpoint: Resolved) -> str:
    """release.tag with {step} {commit} {run} {date} of the checkpoint filled in."""
    lineage = checkpoint.parsed.lineage()
    values = {
        "step": lineage.step,
        "commit": lineage.git_commit[:12] if lineage.git_commit else None,
        "run": lineage.run_id,
        "date": clock.now().strftime("%Y%m%d"),
    }
    needed = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    missing = [name for name in needed if values.get(name) is None]
    if missing:
        raise InputError(
            f"release.tag {template!r} needs {{{missing[0]}}}, which {checkpoint.ref} does not record",
            hint="pass --version TAG, or change release.tag",
        )
    return template.format(**{k: v for k, v in values.items() if v is not None})


def _who(manifest: Manifest) -> str:
    from trainops.gitinfo import git_user  # lazy: loads subprocess

    return git_user(manifest.root) or os.environ.get("USER") or os.environ.get("LOGNAME") or "unknown"


def image_parent(manifest: Manifest, registries: Registries, digest: str | None) -> Parent | None:
    """The training image a checkpoint recorded (its imageDigest), as a parent, when it is in
    the repository the manifest builds images to (or train.image's); else None."""
    from trainops.image.api import base_reference  # lazy: loads tarfile

    if digest is None:
        return None
    spec = manifest.pipeline.spec
    name = manifest.pipeline.metadata.name
    candidates = [spec.train.image] if spec.train is not None and spec.train.image else []
    if spec.image is not None:
        candidates.append(spec.repository(name, "image", spec.image.repository))
    for text in candidates:
        try:
            repo = base_reference(text, registries).with_tag(None).with_digest(None)
            found = resolve(registries, ref=repo.with_digest(digest))
        except TrainopsError:  # not there, or unreachable: the digest stays recorded in imageDigest
            continue
        return Parent(digest=found.manifest.digest, ref=repo.repo_url, relation="image")
    return None


def _lineage(manifest: Manifest, chosen: Candidate, forced: Forced | None, image: Parent | None) -> Lineage:
    source = chosen.checkpoint.parsed.lineage()
    ckpt = chosen.checkpoint
    parents = [Parent(digest=ckpt.manifest.digest, ref=str(ckpt.ref.with_digest(None)), relation="released-from")]
    if chosen.passing is not None:
        report = chosen.passing
        parents.append(Parent(digest=report.digest, ref=ckpt.ref.repo_url, relation="evaluated-by"))
    if image is not None:
        parents.append(image)
    return Lineage(
        pipeline=manifest.pipeline.metadata.name,
        git_commit=source.git_commit,
        git_repo=source.git_repo,
        image_digest=source.image_digest,
        run_id=source.run_id,
        step=source.step,
        metrics=chosen.passing.report.metrics if chosen.passing else dict(source.metrics),
        parents=parents,
        forced=forced,
    )


def _annotations(spec: ReleaseSpec, chosen: Candidate, tag: str, forced: Forced | None) -> dict[str, str]:
    notes = dict(spec.annotations)
    notes.update({media.A_VERSION: tag, media.A_RELEASE_CHECKPOINT: str(chosen.checkpoint.ref)})
    if chosen.passing is not None:
        notes[media.A_RELEASE_EVAL] = chosen.passing.ref
    if forced is not None:
        notes.update(
            {media.A_RELEASE_FORCED: "true", media.A_RELEASE_REASON: forced.reason, media.A_RELEASE_BY: forced.by}
        )
    return notes
