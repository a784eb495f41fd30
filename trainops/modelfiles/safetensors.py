"""Reading safetensors headers without the tensors, and what a model directory holds.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the
tensor bytes. `read_header` reads only the first 8 + N bytes through a `read_at(offset,
length)` callable, so a local file, an HTTP Range request or an S3 ranged GET all serve.
Every value in the header is checked before it is believed: the length is capped (100 MiB,
as the upstream safetensors library does), offsets lie inside the file, tensors are
contiguous and do not overlap, and each tensor's shape × dtype size equals its byte span.
A header that breaks a rule is an InputError naming the file; memory stays bounded by the cap.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from trainops.errors import InputError

MAX_HEADER = 100 * 1024 * 1024  # bytes; the upstream library refuses larger headers too
METADATA_KEY = "__metadata__"
MAX_CONFIG = 16 * 1024 * 1024  # bytes of config.json read for the architecture

# Bits per element of every dtype the safetensors format defines.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "C64": 64,
}

# ModelPack's precision names ("bf16", "fp16", "int8", …) of safetensors dtypes.
PRECISION_NAMES: dict[str, str] = {
    "F64": "fp64",
    "F32": "fp32",
    "F16": "fp16",
    "BF16": "bf16",
    "F8_E4M3": "fp8",
    "F8_E5M2": "fp8",
    "F8_E8M0": "fp8",
    "F4": "fp4",
    "F6_E2M3": "fp6",
    "F6_E3M2": "fp6",
    "I8": "int8",
    "U8": "uint8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "BOOL": "bool",
    "C64": "complex64",
}

ReadAt = Callable[[int, int], bytes]


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]  # relative to the first byte after the header

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class SafetensorsHeader:
    """What a safetensors header says: its tensors, metadata, and totals."""

    name: str
    size: int  # bytes of the whole file
    header_size: int  # N, the JSON header's length
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def parameter_count(self) -> int:
        return sum(t.elements for t in self.tensors.values())

    @property
    def dtypes(self) -> dict[str, int]:
        """Parameters per dtype."""
        counts: Counter[str] = Counter()
        for tensor in self.tensors.values():
            counts[tensor.dtype] += tensor.elements
        return dict(counts)


def _bad(name: str, problem: str) -> InputError:
    return InputError(f"{name}: not a valid safetensors file: {problem}", hint="re-export or re-download the file")


def read_header(read_at: ReadAt, *, size: int, name: str) -> SafetensorsHeader:
    """Parse the header of a safetensors file of `size` bytes; read_at(offset, length) → bytes.

    Reads 8 bytes, then the header (at most MAX_HEADER bytes), never the tensors.
    """
    if size < 8:
        raise _bad(name, f"it is {size} bytes, shorter than the 8-byte header length")
    head = read_at(0, 8)
    if len(head) != 8:
        raise _bad(name, "the 8-byte header length could not be read (truncated)")
    length = int.from_bytes(head, "little")
    if length > MAX_HEADER:
        raise _bad(name, f"header length {length} exceeds the {MAX_HEADER}-byte limit")
    if length < 2 or 8 + length > size:
        raise _bad(name, f"header length {length} does not fit in the file's {size} bytes (truncated?)")
    raw = read_at(8, length)
    if len(raw) != length:
        raise _bad(name, f"header truncated: read {len(raw)} of {length} bytes")
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique)
    except _Duplicate as dup:
        raise _bad(name, f"the header names {dup.key!r} twice") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise _bad(name, f"the header is not JSON ({str(err).splitlines()[0][:120]})") from None
    if not isinstance(doc, dict):
        raise _bad(name, f"the header is a JSON {type(doc).__name__}, not an object")
    metadata = _metadata(doc.pop(METADATA_KEY, None), name)
    tensors = {key: _tensor(key, value, name) for key, value in doc.items()}
    _check_layout(tensors, data_size=size - 8 - length, name=name)
    return SafetensorsHeader(name=name, size=size, header_size=length, tensors=tensors, metadata=metadata)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique (a repeated tensor name could hide a tensor)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _metadata(value: Any, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(name, f"{METADATA_KEY} must map strings to strings")
    return dict(value)


def _tensor(key: str, value: Any, name: str) -> TensorInfo:
    if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data_offsets"}:
        raise _bad(name, f"tensor {key!r} must have exactly dtype, shape and data_offsets")
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    if dtype not in DTYPE_BITS:
        raise _bad(name, f"tensor {key!r} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise _bad(name, f"tensor {key!r} has a shape that is not a list of non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise _bad(name, f"tensor {key!r} has data_offsets that are not [begin, end] with begin <= end")
    return TensorInfo(dtype=dtype, shape=tuple(shape), data_offsets=(offsets[0], offsets[1]))


def _check_layout(tensors: dict[str, TensorInfo], *, data_size: int, name: str) -> None:
    """Tensors tile the data section: sorted by offset, each starts where the last ended."""
    position = 0
    for key, tensor in sorted(tensors.items(), key=lambda item: item[1].data_offsets):
        begin, end = tensor.data_offsets
        if begin != position:
            what = "overlaps the previous tensor" if begin < position else "leaves a gap before it"
            raise _bad(name, f"tensor {key!r} at offset {begin} {what} (expected {position})")
        if end > data_size:
            raise _bad(name, f"tensor {key!r} ends at {end}, past the end of the data ({data_size} bytes)")
        bits = tensor.elements * DTYPE_BITS[tensor.dtype]
        if bits % 8 or bits // 8 != end - begin:
            raise _bad(
                name,
                f"tensor {key!r}: shape {list(tensor.shape)} of {tensor.dtype} needs {bits / 8:g} bytes, "
                f"data_offsets span {end - begin}",
            )
        position = end
    if position != data_size:
        raise _bad(name, f"the tensors cover {position} of the {data_size} data bytes")


def read_file_header(path: Path) -> SafetensorsHeader:
    """The header of a local safetensors file (reads 8 bytes and the header only)."""
    try:
        with path.open("rb") as fh:
            size = path.stat().st_size

            def read_at(offset: int, length: int) -> bytes:
                fh.seek(offset)
                return fh.read(length)

            return read_header(read_at, size=size, name=str(path))
    except OSError as err:
        raise InputError(f"{path}: cannot read it ({err.strerror or err})") from None


# -- what a model directory holds -------------------------------------------------------------

_FORMATS = (
    ("safetensors", ("*.safetensors",)),
    ("gguf", ("*.gguf",)),
    ("pytorch", ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.distcp")),
    ("onnx", ("*.onnx",)),
    ("tensorflow", ("*.h5", "*.tflite")),
)


@dataclass(frozen=True)
class ModelInfo:
    """ModelPack's config fields, read from a model directory."""

    format: str | None
    param_size: str | None  # "6.7b", "124.4m", "30.2k"
    precision: str | None  # the dominant dtype by parameter count: "bf16", "fp32", …
    architecture: str | None
    parameter_count: int | None = None

    def as_config(self) -> dict[str, str]:
        """The ModelPack `config` object (only the fields known)."""
        out = {
            "architecture": self.architecture,
            "format": self.format,
            "paramSize": self.param_size,
            "precision": self.precision,
        }
        return {k: v for k, v in out.items() if v}


def param_size(count: int) -> str:
    """ModelPack's paramSize: a count with at most one decimal and a k/m/b/t/q scale."""
    for scale, letter in ((10**15, "q"), (10**12, "t"), (10**9, "b"), (10**6, "m"), (10**3, "k")):
        if count >= scale:
            return f"{count / scale:.1f}".removesuffix(".0") + letter
    return f"{max(count, 100) / 1000:.1f}k" if count else "0k"  # the spec's smallest: 0.1k


def _format_of(names: list[str]) -> str | None:
    for fmt, patterns in _FORMATS:
        if any(fnmatch(name.rsplit("/", 1)[-1], p) for name in names for p in patterns):
            return fmt
    return None


def architecture_of(config: bytes | None) -> str | None:
    """`architectures[0]`, else `model_type`, of a config.json's bytes (None if unreadable)."""
    if config is None or len(config) > MAX_CONFIG:
        return None
    try:
        doc = json.loads(config.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    names = doc.get("architectures")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    kind = doc.get("model_type")
    return kind if isinstance(kind, str) and kind else None


def summarize(names: list[str], headers: list[SafetensorsHeader], config: bytes | None) -> ModelInfo:
    """ModelInfo from a model's file names, its safetensors headers and its config.json."""
    counts: Counter[str] = Counter()
    for header in headers:
        counts.update(header.dtypes)
    total = sum(counts.values())
    precision = None
    if counts:
        dominant = max(sorted(counts), key=lambda d: counts[d])
        precision = PRECISION_NAMES.get(dominant, dominant.lower())
    return ModelInfo(
        format=_format_of(names),
        param_size=param_size(total) if counts else None,
        precision=precision,
        architecture=architecture_of(config),
        parameter_count=total if counts else None,
    )


def model_info(directory: Path) -> ModelInfo:
    """Format by the files, parameters and precision from the safetensors headers (never the
    tensors), architecture from config.json."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    headers = [read_file_header(path) for path in files if path.suffix == ".safetensors"]
    config = directory / "config.json"
    raw = config.read_bytes() if config.is_file() and config.stat().st_size <= MAX_CONFIG else None
    return summarize([p.relative_to(directory).as_posix() for p in files], headers, raw)
