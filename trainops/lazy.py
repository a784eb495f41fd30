"""Package `__init__`s that name their API without importing it.

A package's `__init__` runs whenever any of its modules is imported: one that imported its
whole API would make `import trainops.render.image` (a few regular expressions) load the
pydantic models of the manifest. A package names its API in `__all__`, imports it under
TYPE_CHECKING for the type checker, and hands `lazy_exports` the module of each name; a
name is imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, homes: Mapping[str, tuple[str, ...]]) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: each name of `homes[module]` from its module."""
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
