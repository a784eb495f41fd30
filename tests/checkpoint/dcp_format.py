"""A writer of the PyTorch Distributed Checkpoint (DCP) format without torch: the test data
of the `dcp` layout.

torch (2.x) writes, per checkpoint, one `__<rank>_<n>.distcp` file per rank and writer
thread (the tensors' bytes, back to back) and, last, `.metadata`: a pickle of
`torch.distributed.checkpoint.metadata.Metadata(state_dict_metadata, planner_data,
storage_data, storage_meta)`, whose `storage_data` maps a `MetadataIndex(fqn, offset,
index)` to a `torch.distributed.checkpoint.filesystem._StorageInfo(relative_path, offset,
length)`. This module declares dataclasses with those names and fields under those module
names and pickles them the way torch does, so the bytes are what torch's loader reads.
torch itself is not installed for the tests (measured on 2026-12-04): PyPI's torch 2.5.1 wheel
for Linux x86_64 is 906.5 MB and `import torch` fails without its CUDA dependencies
(`libcublas.so.*[0-9] not found`: the nvidia-* wheels, gigabytes more); the CPU-only wheel is
not on PyPI.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

META = "torch.distributed.checkpoint.metadata"
FS = "torch.distributed.checkpoint.filesystem"


@dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: Any = None
    index: int | None = None


@dataclass
class ChunkStorageMetadata:
    offsets: Any
    sizes: Any


@dataclass
class TensorStorageMetadata:
    properties: Any
    size: Any
    chunks: list[ChunkStorageMetadata]


@dataclass
class Metadata:
    state_dict_metadata: dict[str, Any]
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Any = None


@dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int


@contextlib.contextmanager
def _as_torch() -> Iterator[None]:
    """The classes above under torch's module names while pickling (pickle looks them up)."""
    made: list[str] = []
    for name in ("torch", "torch.distributed", "torch.distributed.checkpoint", META, FS):
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
            made.append(name)
    saved = {}
    for cls, module in (
        (MetadataIndex, META),
        (ChunkStorageMetadata, META),
        (TensorStorageMetadata, META),
        (Metadata, META),
        (_StorageInfo, FS),
    ):
        saved[cls] = cls.__module__
        cls.__module__ = module
        setattr(sys.modules[module], cls.__name__, cls)
    try:
        yield
    finally:
        for cls, module in saved.items():
            cls.__module__ = module
        for name in made:
            del sys.modules[name]


@dataclass
class Written:
    path: Path
    shards: dict[str, int] = field(default_factory=dict)  # file name → bytes


def write_dcp(
    directory: Path,
    *,
    ranks: int = 2,
    tensors: int = 3,
    size: int = 4096,
    metadata: bool = True,
    replicated_in: int | None = None,
) -> Written:
    """One DCP checkpoint in `directory`: `ranks` shard files of `tensors` tensors of `size`
    bytes each, then (unless metadata=False, a writer killed before the coordinator's step)
    `.metadata`, written last as torch does. replicated_in: rank whose file also holds a
    replicated tensor, stored once, whole (as DCP's save deduplicates one every rank holds)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = Written(directory)
    storage: dict[Any, Any] = {}
    state: dict[str, Any] = {}
    for rank in range(ranks):
        name = f"__{rank}_0.distcp"
        with (directory / name).open("wb") as fh:
            for t in range(tensors):
                fqn = f"model.layers.{t}.weight"
                index = MetadataIndex(fqn, (rank * size // 4,), rank)
                storage[index] = _StorageInfo(name, t * size, size)
                fh.write(os.urandom(size))
                chunk = ChunkStorageMetadata((rank * size // 4,), (size // 4,))
                state.setdefault(fqn, TensorStorageMetadata({"dtype": "float32"}, (ranks * size // 4,), []))
                state[fqn].chunks.append(chunk)
            if rank == replicated_in:
                fqn = "model.embed.weight"
                storage[MetadataIndex(fqn, (0,), 0)] = _StorageInfo(name, tensors * size, size)
                fh.write(os.urandom(size))
                state[fqn] = TensorStorageMetadata(
                    {"dtype": "float32"}, (size // 4,), [ChunkStorageMetadata((0,), (size // 4,))]
                )
        written.shards[name] = (tensors + (rank == replicated_in)) * size
    if metadata:
        with _as_torch():
            data = pickle.dumps(Metadata(state, None, storage, None), protocol=pickle.HIGHEST_PROTOCOL)
        (directory / ".metadata").write_bytes(data)
    return written
