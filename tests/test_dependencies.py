"""Dependencies are the ones used: every runtime dependency in pyproject is imported by trainops."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "trainops").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _distribution(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_runtime_dependency_is_imported_by_trainops() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {_distribution(r) for r in project["dependencies"]}
    modules_of: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    imported = _imported_top_levels()
    unused = sorted(d for d in runtime if not modules_of.get(d, set()) & imported)
    assert not unused, f"runtime dependencies trainops never imports: {unused} (move them to an extra)"


def test_what_trainops_never_needs_at_runtime_is_not_a_runtime_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {_distribution(r) for r in project["dependencies"]}
    assert not runtime & {"oras", "numpy", "safetensors"}
    assert "oras" in {_distribution(r) for r in project["optional-dependencies"]["dev"]}  # the interop peer
