"""The simulated cluster's binaries: built by scripts/build-kube.sh at the versions pinned in
scripts/kube-versions.env, cached as ``bin/<name>-<version>`` (with the modules' sources,
whose CRDs and webhook manifests the cluster installs)."""

from __future__ import annotations

import os
from pathlib import Path

from services import MissingDependency

REPO = Path(__file__).resolve().parent.parent
VERSIONS_FILE = REPO / "scripts" / "kube-versions.env"
BUILD = "scripts/build-kube.sh"
SKIP_ENV = "TRAINOPS_SKIP_KUBE"


def cache_dir() -> Path:
    return Path(os.environ.get("TRAINOPS_KUBE_CACHE", "/var/cache/trainops-kube"))


def versions() -> dict[str, str]:
    """The pins of scripts/kube-versions.env (KEY=VALUE lines)."""
    out: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


# binary name -> (version key, build-kube.sh component)
_BINARIES = {
    "etcd": ("ETCD_VERSION", "etcd"),
    "kube-apiserver": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-controller-manager": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-scheduler": ("KUBERNETES_VERSION", "kubernetes"),
    "kubectl": ("KUBERNETES_VERSION", "kubernetes"),
    "kwok": ("KWOK_VERSION", "kwok"),
    "vc-scheduler": ("VOLCANO_VERSION", "volcano"),
    "vc-controller-manager": ("VOLCANO_VERSION", "volcano"),
    "vc-webhook-manager": ("VOLCANO_VERSION", "volcano"),
    "kueue": ("KUEUE_VERSION", "kueue"),
    "jobset": ("JOBSET_VERSION", "jobset"),
    "lws": ("LWS_VERSION", "lws"),
    "kserve-manager": ("KSERVE_VERSION", "kserve"),
}


def binary(name: str) -> Path:
    """The cached binary ``bin/<name>-<version>``, or MissingDependency naming the build command."""
    key, component = _BINARIES[name]
    path = cache_dir() / "bin" / f"{name}-{versions()[key]}"
    if not os.access(path, os.X_OK):
        raise MissingDependency(
            f"{path} not found: run `{BUILD} {component}` as root (needs Go; or set {SKIP_ENV}=1 to skip cluster tests)"
        )
    return path


def module_source(module: str, version_key: str) -> Path:
    """Where the build left an upstream project's source at its pinned version (its CRDs and
    webhook manifests): the tree build-kube.sh exported from its git tag (``src/NAME-VERSION``,
    for the modules the proxy does not serve), else the module cache's copy."""
    version = versions()[version_key]
    candidates = [
        cache_dir() / "src" / f"{module.rsplit('/', 1)[-1]}-{version}",
        cache_dir() / "go" / "pkg" / "mod" / f"{module}@{version}",
    ]
    for path in candidates:
        if (path / "go.mod").is_file():
            return path
    component = version_key.removesuffix("_VERSION").lower()
    raise MissingDependency(f"{candidates[0]} not found: run `{BUILD} {component}` as root")
