"""What the safetensors files of an artifact hold, read from the registry without the tensors.

Each `*.safetensors` layer's header is read with ranged reads (Backend.read_range: a seek
on file://, an HTTP Range request on oci://, a ranged GET on s3://): 8 bytes, then the
header, never the data. The one header reader is trainops.modelfiles.safetensors.read_header,
which bounds and checks everything before believing it. A file whose header it refuses
(hostile or damaged) is listed as unreadable with the reason; the rest is still shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import InputError, IntegrityError
from trainops.modelfiles.safetensors import model_info, read_header
from trainops.registry.artifact import ModelConfig
from trainops.registry.context import Registries
from trainops.registry.inspect import ArtifactInfo
from trainops.registry.inspect import show as show_artifact
from trainops.registry.reference import Reference

if TYPE_CHECKING:
    from trainops.modelfiles.safetensors import SafetensorsHeader

TENSOR_KINDS = ("model", "checkpoint")
TOP_SHAPES = 8


@dataclass(frozen=True)
class ShapeCount:
    dtype: str
    shape: list[int]
    tensors: int
    parameters: int


@dataclass
class TensorSummary:
    files: int  # safetensors files read
    tensors: int
    parameters: int
    dtypes: dict[str, int]  # parameters per dtype, largest first
    shapes: list[ShapeCount]  # the most frequent (dtype, shape) pairs by parameters
    header_bytes: int  # bytes read to learn all this
    bytes_total: int  # size of the safetensors files
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)  # per file, when present
    unreadable: dict[str, str] = field(default_factory=dict)  # file → why its header was refused


@dataclass
class ShowResult(ArtifactInfo):
    """`registry show`: the artifact, and what its tensors are (None: not a model or checkpoint)."""

    tensors: TensorSummary | None = None


def tensor_summary(registries: Registries, *, ref: Reference, info: ArtifactInfo) -> TensorSummary | None:
    """Headers of the artifact's safetensors files, summed; None if it has none."""
    files = [f for f in info.files if f.path.endswith(".safetensors")]
    if not files:
        return None
    pinned = registries.ref(info.ref)
    backend = registries.backend(pinned)
    read = 0
    dtypes: Counter[str] = Counter()
    shapes: Counter[tuple[str, tuple[int, ...]]] = Counter()
    params: Counter[tuple[str, tuple[int, ...]]] = Counter()
    metadata: dict[str, dict[str, str]] = {}
    unreadable: dict[str, str] = {}
    tensors = 0
    for f in files:

        def read_at(offset: int, length: int, digest: str = f.digest) -> bytes:
            nonlocal read
            data = backend.read_range(pinned.repository, digest, offset, length)
            read += len(data)
            return data

        try:
            header = _header(read_at, f.path, f.size, f.media_type, f"{pinned}: {f.path}")
        except (InputError, IntegrityError) as err:  # a hostile or damaged header: say so, show the rest
            unreadable[f.path] = err.message
            continue
        tensors += len(header.tensors)
        dtypes.update(header.dtypes)
        for t in header.tensors.values():
            shapes[(t.dtype, t.shape)] += 1
            params[(t.dtype, t.shape)] += t.elements
        if header.metadata:
            metadata[f.path] = header.metadata
    top = sorted(shapes, key=lambda k: (-params[k], -shapes[k], k))[:TOP_SHAPES]
    return TensorSummary(
        files=len(files),
        tensors=tensors,
        parameters=sum(dtypes.values()),
        dtypes=dict(sorted(dtypes.items(), key=lambda kv: (-kv[1], kv[0]))),
        shapes=[ShapeCount(d, list(s), shapes[(d, s)], params[(d, s)]) for d, s in top],
        header_bytes=read,
        bytes_total=sum(f.size for f in files),
        metadata=metadata,
        unreadable=unreadable,
    )


def _header(
    read_at: Callable[[int, int], bytes], path: str, size: int, media_type: str, where: str
) -> SafetensorsHeader:
    """A safetensors header from its layer: the file itself, or the file inside a ModelPack
    tar layer (modctl's), read in place after the tar's header blocks."""
    from trainops.registry import media, modelpack  # lazy: loads tarfile

    packed = media.packing(media_type)
    if packed is None:
        return read_header(read_at, size=size, name=path)
    if packed != "tar":
        raise InputError(f"{path} is in a compressed tar layer ({packed}): its header is not read in place")
    offset, inner = modelpack.data_span(read_at, path, where)
    return read_header(lambda at, length: read_at(offset + at, length), size=inner, name=path)


def show(registries: Registries, *, ref: Reference) -> ShowResult:
    """`registry show`: the artifact, and for models and checkpoints what their tensors are."""
    info = show_artifact(registries, ref=ref)
    tensors = tensor_summary(registries, ref=ref, info=info) if info.kind in TENSOR_KINDS else None
    return ShowResult(**vars(info), tensors=tensors)


def model_config(directory: Path) -> ModelConfig:
    """The ModelPack config of a model directory, from its files (what releases record too)."""

    return ModelConfig(config=model_info(directory).as_config())
