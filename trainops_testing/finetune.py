"""Safetensors-shaped files for the chunked-artifact tests and bench/dedup.py: a fine-tune series."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

MiB = 1024 * 1024


def write_safetensors(path: Path, tensors: list[tuple[str, bytes]]) -> Path:
    """A valid safetensors file (F32 tensors) whose tensors hold the given bytes, in order."""
    header: dict[str, object] = {}
    offset = 0
    for name, data in tensors:
        header[name] = {"dtype": "F32", "shape": [len(data) // 4], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, sort_keys=True).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for _, data in tensors:
            fh.write(data)
    return path


class FineTune:
    """A fine-tune series: half of the tensors frozen (the same bytes every checkpoint),
    the other half new random bytes every checkpoint."""

    def __init__(self, *, tensors: int, tensor_size: int) -> None:
        self.count, self.size = tensors, tensor_size
        self.frozen = {i: os.urandom(tensor_size) for i in range(0, tensors, 2)}

    def checkpoint(self, directory: Path) -> Path:
        tensors = [(f"layer.{i:03d}.weight", self.frozen.get(i) or os.urandom(self.size)) for i in range(self.count)]
        write_safetensors(directory / "model.safetensors", tensors)
        (directory / "config.json").write_text('{"model_type": "tiny"}')
        return directory
