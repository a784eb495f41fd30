"""PyTorch Distributed Checkpoint (DCP) layout, as torchtitan writes it: `step-N/` directories,
each with the ranks' shard files (`__<rank>_<n>.distcp`) and a `.metadata` file that the
coordinator writes last, once every rank has finished.

A step directory is complete only when `.metadata` exists, can be read, and every shard
file it names exists and holds the bytes it needs (offset + length of each item stored in
it). `.metadata` is a pickle of torch's `Metadata` dataclass; it is read here without torch
and without running anything it holds: a restricted unpickler builds plain stand-ins for
the classes of `torch.distributed.checkpoint` (and torch's `Size` and dtypes) and refuses
every other global, so a checkpoint directory can never make trainops execute code.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

from trainops.checkpoint.layouts.base import Found, Layout, Listing, numbered_dirs

STEP_DIR = re.compile(r"^step-([0-9]+)$")
METADATA = ".metadata"
MAX_METADATA = 256 * 1024 * 1024
_ALLOWED_MODULES = ("torch.distributed.checkpoint", "torch._utils", "torch.serialization")
_SAFE_BUILTINS = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice")}


class Stub:
    """A stand-in for one of torch's metadata classes: whatever it was built with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.state: dict[str, Any] = {}

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) of a slotted dataclass
            state = {**(state[0] or {}), **(state[1] or {})}
        self.state = state if isinstance(state, dict) else {"value": state}

    def __reduce__(self) -> Any:  # never re-pickled, but keep the default safe
        raise TypeError("a DCP metadata stand-in cannot be pickled")

    @classmethod
    def new(cls, *args: Any, **kwargs: Any) -> Stub:
        return cls(*args, **kwargs)


def _stub_class(module: str, name: str) -> type:
    return type(name, (Stub,), {"__module__": "trainops.checkpoint.layouts.dcp", "origin": f"{module}.{name}"})


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if module == "torch" or module.startswith(_ALLOWED_MODULES):
            return _stub_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a DCP metadata file")


def load_metadata(metadata: bytes) -> Stub | None:
    """A DCP `.metadata` as stand-ins (torch's Metadata: `.state` holds its fields), or None
    when it is not one this reader understands."""
    try:
        root = _Unpickler(io.BytesIO(metadata)).load()
    except Exception:  # a torn or foreign file: not complete (the writer may still be at it)
        return None
    return root if isinstance(root, Stub) and isinstance(root.state, dict) else None


def storage_extents(metadata: bytes) -> dict[str, int] | None:
    """The bytes each shard file must hold (relative path → max offset + length), or None
    when the file is not a DCP `.metadata` this reader understands."""
    root = load_metadata(metadata)
    storage = root.state.get("storage_data") if root is not None else None
    if not isinstance(storage, dict):
        return None
    extents: dict[str, int] = {}
    for info in storage.values():
        fields = getattr(info, "state", {}) if isinstance(info, Stub) else {}
        path, offset, length = fields.get("relative_path"), fields.get("offset"), fields.get("length")
        if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(length, int):
            return None
        extents[path] = max(extents.get(path, 0), offset + length)
    return extents


def complete(path: Path) -> bool:
    """`.metadata` is whole and every shard it names holds the bytes it needs."""
    meta = path / METADATA
    try:
        if meta.stat().st_size > MAX_METADATA:
            return False
        extents = storage_extents(meta.read_bytes())
    except OSError:
        return False
    if not extents:
        return False
    for name, needed in extents.items():
        shard = (path / name).resolve()
        if path.resolve() not in shard.parents:  # a name that escapes the checkpoint: not ours
            return False
        try:
            if shard.stat().st_size < needed:
                return False
        except OSError:
            return False
    return True


def is_dcp(directory: Path, names: set[str]) -> bool:
    """Whether a directory of step-N/ checkpoints holds DCP ones (a step dir with .metadata or shards)."""
    for name in sorted(names):
        if STEP_DIR.match(name):
            step = directory / name
            try:
                inside = {p.name for p in step.iterdir()}
            except OSError:
                continue
            if METADATA in inside or any(n.endswith(".distcp") for n in inside):
                return True
    return False


class DcpLayout(Layout):
    name = "dcp"

    def claims(self, names: set[str]) -> bool:
        return False  # step-N/ is the trainops layout's too: detect_layout looks inside (is_dcp)

    def listing(self, directory: Path) -> Listing:
        found = [
            Found(name, path, step, committed=complete(path)) for step, name, path in numbered_dirs(directory, STEP_DIR)
        ]
        return Listing(found, any(not f.committed for f in found))

    def default_name(self, step: int) -> str:
        return f"step-{step}"

    def step_of(self, name: str) -> int | None:
        match = STEP_DIR.match(name)
        return int(match.group(1)) if match else None
