"""The simulated cluster's parts: the binaries ``bin/<name>-<version>`` that
scripts/kube_components.py puts in the cache (from a prebuilt archive or a source build,
checked against scripts/kube-sums.txt) at the versions pinned in scripts/kube-versions.env,
and the upstream files the cluster installs (CRDs, webhook manifests), vendored in
tests/upstream/<component>-<version>/ by scripts/vendor_kube_sources.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from trainops_testing.services import MissingDependency

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO / "tests" / "upstream"
INSTALL = "scripts/kube_components.py"
SKIP_ENV = "TRAINOPS_SKIP_KUBE"


def script(name: str) -> object:
    """scripts/<name>.py as module ``name`` (scripts/ is not a package; its modules import
    each other by these names, as they do when run)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _components() -> object:
    """scripts/kube_components.py, the one home of the components, their versions and binaries."""
    return script("kube_components")


COMPONENTS: dict[str, tuple[str, tuple[str, ...]]] = _components().COMPONENTS  # type: ignore[attr-defined]
# binary name -> component
_BINARIES = {binary: component for component, (_, binaries) in COMPONENTS.items() for binary in binaries}


def cache_dir() -> Path:
    return Path(os.environ.get("TRAINOPS_KUBE_CACHE") or "/var/cache/trainops-kube")


def versions() -> dict[str, str]:
    """The pins of scripts/kube-versions.env (KEY=VALUE lines)."""
    return _components().versions()  # type: ignore[attr-defined,no-any-return]


def version(component: str) -> str:
    return versions()[COMPONENTS[component][0]]


def binary(name: str) -> Path:
    """The cached binary ``bin/<name>-<version>``, or MissingDependency naming the command that puts it there."""
    component = _BINARIES[name]
    path = cache_dir() / "bin" / f"{name}-{version(component)}"
    if not os.access(path, os.X_OK):
        raise MissingDependency(
            f"{path} not found: run `{INSTALL} {component}` as root (TRAINOPS_KUBE_PREBUILT=<directory of "
            f"prebuilt archives>, else it builds from source; or set {SKIP_ENV}=1 to skip cluster tests)"
        )
    return path


def upstream(component: str) -> Path:
    """The component's vendored upstream files at its pinned version (tests/upstream/)."""
    path = UPSTREAM / f"{component}-{version(component)}"
    if not path.is_dir():
        raise MissingDependency(
            f"{path} not found: the pinned version's upstream files are not vendored; "
            f"run scripts/vendor_kube_sources.py {component}"
        )
    return path
