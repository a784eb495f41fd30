#!/usr/bin/env python3
"""Refresh tests/upstream/: the upstream files the simulated cluster installs (CRDs, webhook
kustomizations, KServe's ConfigMap, Argo CD's git wrapper), copied byte for byte at the
versions pinned in scripts/kube-versions.env, with SOURCES.md (path, version, sha256).

    scripts/vendor_kube_sources.py [COMPONENT...]      (default: every one below)

Volcano, JobSet, LeaderWorkerSet and Kueue come from their git tags (the Go module proxy does
not serve them whole): the repository named by TRAINOPS_<NAME>_SRC (a clone or bare mirror),
else a shallow fetch of the tag from GitHub. KServe, Argo CD, Argo Rollouts, KubeRay and Kubeflow
Trainer come from the Go module proxy (`go mod download`, checked against the checksum database). A file with the
same bytes as one of trainops/render/crds/ is stored as a relative symlink to it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_components import GIT_SOURCES, versions

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO / "tests" / "upstream"
RENDER_CRDS = REPO / "trainops" / "render" / "crds"

# component -> (version key, git URL or Go module, paths: a trailing "/" takes everything under the directory)
SPEC: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "volcano": ("VOLCANO_VERSION", GIT_SOURCES["volcano"], ("config/crd/volcano/bases/", "config/crd/jobflow/bases/")),
    "jobset": ("JOBSET_VERSION", GIT_SOURCES["jobset"], ("config/components/crd/bases/", "config/components/webhook/")),
    "lws": ("LWS_VERSION", GIT_SOURCES["lws"], ("config/crd/bases/", "config/webhook/")),
    "kueue": ("KUEUE_VERSION", GIT_SOURCES["kueue"], ("config/components/crd/bases/", "config/components/webhook/")),
    "kserve": (
        "KSERVE_VERSION",
        "github.com/kserve/kserve",
        (
            "config/crd/full/serving.kserve.io_clusterservingruntimes.yaml",
            "config/crd/full/serving.kserve.io_inferencegraphs.yaml",
            "config/crd/full/serving.kserve.io_servingruntimes.yaml",
            "config/crd/full/serving.kserve.io_trainedmodels.yaml",
            "config/configmap/inferenceservice.yaml",
        ),
    ),
    "argocd": (
        "ARGOCD_VERSION",
        "github.com/argoproj/argo-cd/v3",
        ("manifests/crds/application-crd.yaml", "manifests/crds/appproject-crd.yaml", "hack/git-verify-wrapper.sh"),
    ),
    "rollouts": ("ROLLOUTS_VERSION", "github.com/argoproj/argo-rollouts", ("manifests/crds/",)),
    # the module is the repository's ray-operator/ directory (tag ray-operator/<version>)
    "kuberay": ("KUBERAY_VERSION", "github.com/ray-project/kuberay/ray-operator", ("config/crd/bases/",)),
    "trainer": (
        "TRAINER_VERSION",
        "github.com/kubeflow/trainer/v2",
        ("manifests/base/crds/", "manifests/base/webhook/", "manifests/base/runtimes/torch_distributed.yaml"),
    ),
}


def _wanted(name: str, paths: tuple[str, ...]) -> bool:
    return any(name == p or (p.endswith("/") and name.startswith(p)) for p in paths)


def from_git(name: str, url: str, tag: str, paths: tuple[str, ...], work: Path) -> dict[str, bytes]:
    var = f"TRAINOPS_{name.upper()}_SRC"
    repo = os.environ.get(var)
    if not repo:
        repo = str(work / f"{name}.git")
        subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
        refspec = f"refs/tags/{tag}:refs/tags/{tag}"
        subprocess.run(["git", "-C", repo, "fetch", "-q", "--depth", "1", url, refspec], check=True)
    listing = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "--name-only", tag], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    files = [p for p in listing if _wanted(p, paths)]
    show = ["git", "-C", repo, "show"]
    return {p: subprocess.run([*show, f"{tag}:{p}"], check=True, capture_output=True).stdout for p in files}


def _h1(zf: zipfile.ZipFile) -> str:
    """Go's dirhash h1 of a module zip (what go.sum and the checksum database record)."""
    h = hashlib.sha256()
    for n in sorted(zf.namelist()):
        h.update(f"{hashlib.sha256(zf.read(n)).hexdigest()}  {n}\n".encode())
    return "h1:" + base64.b64encode(h.digest()).decode()


def from_module(module: str, version: str, paths: tuple[str, ...], work: Path) -> dict[str, bytes]:
    # `go mod download` checks the zip against the checksum database; a module that needs a
    # newer Go still downloads (its JSON carries an Error beside the Zip)
    env = {**os.environ, "GOMODCACHE": str(work / "mod"), "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local"}
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"], cwd=work, env=env, capture_output=True, text=True
    ).stdout
    info = json.loads(out)
    if not info.get("Zip") or not info.get("Sum"):
        raise SystemExit(f"vendor_kube_sources: {module}@{version}: {info.get('Error', 'not downloaded')}")
    with zipfile.ZipFile(info["Zip"]) as zf:
        if _h1(zf) != info["Sum"]:
            raise SystemExit(f"vendor_kube_sources: {info['Zip']} does not match {info['Sum']}")
        prefix = f"{module}@{version}/"
        return {n[len(prefix) :]: zf.read(n) for n in zf.namelist() if _wanted(n[len(prefix) :], paths)}


def vendor(name: str, pins: dict[str, str], work: Path) -> list[tuple[str, str, str, str]]:
    key, origin, paths = SPEC[name]
    version = pins[key]
    if origin in GIT_SOURCES.values():
        files = from_git(name, origin, version, paths, work)
    else:
        files = from_module(origin, version, paths, work)
    same = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in RENDER_CRDS.glob("*.yaml")}
    for old in UPSTREAM.glob(f"{name}-*"):
        shutil.rmtree(old)
    root = UPSTREAM / f"{name}-{version}"
    rows = []
    for path, data in sorted(files.items()):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(data).hexdigest()
        if digest in same:
            target.symlink_to(os.path.relpath(same[digest], target.parent))
            note = f"symlink: same bytes as trainops/render/crds/{same[digest].name}"
        else:
            target.write_bytes(data)
            if path.endswith(".sh"):
                target.chmod(0o755)
            note = ""
        rows.append((f"{name}-{version}/{path}", origin, digest, note))
    return rows


HEADER = """# Upstream files of the simulated cluster's components

Copied byte for byte by `scripts/vendor_kube_sources.py` at the versions pinned in
`scripts/kube-versions.env` (the component's directory is `<component>-<version>`); the
cluster harness (trainops_testing: kube_addons, kserve_cluster, argo_cluster) reads
them from here. Git repositories at the version's tag; Go modules from the module proxy,
checked against the checksum database. All are Apache-2.0 licensed. `tests/test_upstream.py`
checks every file against its sha256 below.

| File | Upstream | sha256 | Note |
|---|---|---|---|
"""


def main(argv: list[str]) -> int:
    names = argv or list(SPEC)
    pins = versions()
    table = UPSTREAM / "SOURCES.md"
    kept = [
        line for line in (table.read_text().splitlines() if table.exists() else [])
        if line.startswith("| ") and not line.startswith(("| File", "|---")) and line.split("-v")[0][2:] not in names
    ]  # fmt: skip
    UPSTREAM.mkdir(parents=True, exist_ok=True)
    rows: list[str] = list(kept)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for path, origin, digest, note in vendor(name, pins, Path(tmp)):
                rows.append(f"| {path} | {origin} | {digest} | {note} |")
    table.write_text(HEADER + "\n".join(sorted(rows)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
