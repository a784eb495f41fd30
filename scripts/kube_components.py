#!/usr/bin/env python3
"""The simulated cluster's components (and cosign) in the cache, verified.

    scripts/kube_components.py [--cache DIR] [--prebuilt DIR] [--no-build] [--carried] [COMPONENT...]

Each component's binaries ``bin/<name>-<version>`` (versions: scripts/kube-versions.env) come
from, in order: the cache (``--cache``, default $TRAINOPS_KUBE_CACHE or
/var/cache/trainops-kube); a directory of prebuilt archives ``<component>-<version>.tar.zst``
(``--prebuilt``, default $TRAINOPS_KUBE_PREBUILT); a source build (scripts/kube_build.py,
scripts/build-cosign.sh) unless ``--no-build``. Every binary is checked against the sha256 sums
pinned in scripts/kube-sums.txt, in the cache too. An archive or a build is unpacked into a
directory inside the cache, checked, and only then renamed into bin/: a refused one leaves the
cache as it was. One line per component on stderr; exit 1 when any is missing or refused.

Standard library only (it runs as root with the system's python3, before any venv) and the
``zstd`` command.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "kube-versions.env"
SUMS_FILE = HERE / "kube-sums.txt"
DEFAULT_CACHE = "/var/cache/trainops-kube"

# component -> (version key in kube-versions.env, its binaries)
COMPONENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "etcd": ("ETCD_VERSION", ("etcd",)),
    "kubernetes": (
        "KUBERNETES_VERSION",
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
    ),
    "kwok": ("KWOK_VERSION", ("kwok",)),
    "volcano": ("VOLCANO_VERSION", ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")),
    "jobset": ("JOBSET_VERSION", ("jobset",)),
    "kueue": ("KUEUE_VERSION", ("kueue",)),
    "lws": ("LWS_VERSION", ("lws",)),
    "argocd": ("ARGOCD_VERSION", ("argocd",)),
    "rollouts": ("ROLLOUTS_VERSION", ("rollouts-controller", "gatewayapi-plugin")),
    "kserve": ("KSERVE_VERSION", ("kserve-manager",)),
    "kuberay": ("KUBERAY_VERSION", ("ray-operator",)),
    "trainer": ("TRAINER_VERSION", ("trainer-controller-manager",)),
    "cosign": ("COSIGN_VERSION", ("cosign",)),
}

# What a source build of a component needs besides Go and the Go module proxy.
GIT_SOURCES = {
    "volcano": "https://github.com/volcano-sh/volcano",
    "jobset": "https://github.com/kubernetes-sigs/jobset",
    "kueue": "https://github.com/kubernetes-sigs/kueue",
    "lws": "https://github.com/kubernetes-sigs/lws",
}


class Refused(Exception):
    """One line: what was refused and why; the cache is unchanged."""


@dataclass(frozen=True)
class Component:
    name: str
    version: str
    binaries: tuple[str, ...]

    @property
    def files(self) -> list[str]:
        return [f"{b}-{self.version}" for b in self.binaries]

    @property
    def archive(self) -> str:
        return f"{self.name}-{self.version}.tar.zst"


def read_env(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def versions() -> dict[str, str]:
    """The pins of scripts/kube-versions.env."""
    return read_env(VERSIONS_FILE)


def component(name: str, pins: dict[str, str] | None = None) -> Component:
    key, binaries = COMPONENTS[name]
    return Component(name, (pins or versions())[key], binaries)


def read_sums(path: Path) -> dict[str, str]:
    """``<sha256>  <file>`` lines (sha256sum's format) -> {file: sha256}."""
    out: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise Refused(f"{path}:{number}: not a sha256sum line: {line!r}")
        out[name.lstrip("*")] = digest
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _check(source: str, name: str, digest: str, sums: dict[str, str], sums_file: Path) -> None:
    pinned = sums.get(name)
    if pinned is None:
        raise Refused(f"{source}: {name} has no pinned sum in {sums_file}: refused")
    if digest != pinned:
        raise Refused(f"{source}: {name} has sha256 {digest[:16]}…, {sums_file} pins {pinned[:16]}…: refused")


def staging_dir(cache: Path, comp: Component) -> Path:
    """A fresh directory inside the cache (same file system as bin/: renames are atomic)."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".incoming-{comp.archive}-", dir=cache))
    except OSError as exc:
        raise Refused(
            f"{cache / 'bin'}: cannot write to the cache ({exc.strerror or exc}): "
            "run as root or point TRAINOPS_KUBE_CACHE at a writable directory"
        ) from None


def install(
    staged: Path, comp: Component, cache: Path, sums: dict[str, str], sums_file: Path, source: str | None
) -> None:
    """Check every staged binary against the pins (unless ``source`` is None: unpacked and
    checked already), then rename them into bin/."""
    for name in comp.files if source is not None else ():
        path = staged / name
        if not path.is_file():
            raise Refused(f"{source}: {name} is missing from it: refused")
        _check(source, name, sha256(path), sums, sums_file)
    try:
        (cache / "bin").mkdir(exist_ok=True)
    except OSError as exc:
        raise Refused(f"{cache / 'bin'}: cannot write to the cache ({exc.strerror or exc}): run as root") from None
    for name in comp.files:
        (staged / name).chmod(0o755)
        os.replace(staged / name, cache / "bin" / name)


def unpack(archive: Path, comp: Component, into: Path, sums: dict[str, str], sums_file: Path) -> None:
    """Stream ``zstd -dc archive`` through tar into ``into``: only the component's binaries,
    regular files, each once, their sums checked as they are written."""
    expected = set(comp.files)
    proc = subprocess.Popen(
        ["zstd", "-dcq", "--", str(archive)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None and proc.stderr is not None
    seen: set[str] = set()
    try:
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    if member.name not in expected:
                        want = ", ".join(sorted(expected))
                        raise Refused(f"{archive}: holds {member.name!r}, not {want} (another version?): refused")
                    if not member.isreg() or member.name in seen:
                        raise Refused(f"{archive}: {member.name} is not one regular file: refused")
                    seen.add(member.name)
                    h = hashlib.sha256()
                    src = tar.extractfile(member)
                    assert src is not None
                    with (into / member.name).open("wb") as out:
                        while chunk := src.read(1 << 20):
                            h.update(chunk)
                            out.write(chunk)
                    _check(str(archive), member.name, h.hexdigest(), sums, sums_file)
        except (tarfile.TarError, EOFError, OSError) as exc:
            proc.kill()
            proc.wait()
            detail = proc.stderr.read().decode(errors="replace").strip().splitlines()
            why = detail[-1] if detail else str(exc)
            raise Refused(f"{archive}: truncated or corrupt ({why}): refused") from None
        proc.stdout.read()
        error = proc.stderr.read().decode(errors="replace").strip().splitlines()
        if proc.wait() != 0:
            raise Refused(f"{archive}: truncated or corrupt (zstd: {error[-1] if error else 'failed'}): refused")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    missing = sorted(expected - seen)
    if missing:
        raise Refused(f"{archive}: {', '.join(missing)} missing from it: refused")


def from_prebuilt(prebuilt: Path, comp: Component, cache: Path, sums: dict[str, str], sums_file: Path) -> str | None:
    """Take the component from ``prebuilt``; None (with the reason) when it has no archive."""
    archive = prebuilt / comp.archive
    if not archive.is_file():
        return None
    staged = staging_dir(cache, comp)
    try:
        unpack(archive, comp, staged, sums, sums_file)
        install(staged, comp, cache, sums, sums_file, None)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return str(archive)


def carried(prebuilt: Path, comp: Component) -> bool:
    """Whether ``prebuilt`` is meant to hold the component: its archive is there, or its
    binaries are named in the directory's SHA256SUMS (then a missing archive is a fault)."""
    if (prebuilt / comp.archive).is_file():
        return True
    try:
        listed = read_sums(prebuilt / "SHA256SUMS")
    except (OSError, Refused):
        return False
    return any(name in listed for name in comp.files)


def absent_note(prebuilt: Path, comp: Component) -> str:
    """Why ``prebuilt`` did not supply the component (no archive; another version's?)."""
    others = sorted(p.name for p in prebuilt.glob(f"{comp.name}-*.tar.zst")) if prebuilt.is_dir() else []
    note = f"{prebuilt / comp.archive} absent"
    if not prebuilt.is_dir():
        note = f"{prebuilt} is not a directory"
    elif others:
        note += f" (it has {', '.join(others)}: another version; the pins are in {VERSIONS_FILE.name})"
    return note


def build_command(comp: Component) -> list[str]:
    if comp.name == "cosign":
        return ["bash", str(HERE / "build-cosign.sh")]
    return [sys.executable, str(HERE / "kube_build.py"), comp.name]


def build_needs(comp: Component) -> str:
    """What a source build of the component needs, for the line that says it failed."""
    needs = "Go >= 1.26 and the Go module proxy ($GOPROXY)"
    if comp.name == "argocd":
        needs += " (which also serves the go1.27.3 toolchain)"
    if comp.name in GIT_SOURCES:
        var = f"TRAINOPS_{comp.name.upper()}_SRC"
        needs += f", and {var} (a clone of {GIT_SOURCES[comp.name]} with tag {comp.version}) or access to github.com"
    return needs


def from_source(comp: Component, cache: Path, sums: dict[str, str], sums_file: Path) -> None:
    """Run the component's build into a directory inside the cache, then check and install."""
    staged = staging_dir(cache, comp)
    try:
        env = {**os.environ, "TRAINOPS_KUBE_CACHE": str(cache), "TRAINOPS_KUBE_BIN_OUT": str(staged)}
        result = subprocess.run(build_command(comp), env=env, stdout=sys.stderr, check=False)
        if result.returncode != 0:
            raise Refused(f"failed (exit {result.returncode}; it needs {build_needs(comp)})")
        install(staged, comp, cache, sums, sums_file, f"the source build ({' '.join(build_command(comp)[1:])})")
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def cached(comp: Component, cache: Path, sums: dict[str, str], sums_file: Path) -> bool:
    """Are all the component's binaries in the cache? A present one that differs is refused."""
    paths = [cache / "bin" / name for name in comp.files]
    present = [p for p in paths if p.is_file()]
    for path in present:
        _check(str(path), path.name, sha256(path), sums, sums_file)
    return len(present) == len(paths) and all(os.access(p, os.X_OK) for p in paths)


def resolve(
    comp: Component, *, cache: Path, prebuilt: Path | None, build: bool, sums: dict[str, str], sums_file: Path
) -> str:
    """Where the component came from (one line); Refused when it is missing or refused."""
    start = time.monotonic()
    if cached(comp, cache, sums, sums_file):
        return f"{comp.name} {comp.version}: in {cache / 'bin'}, checked"
    tried = [f"cache {cache / 'bin'}: absent"]
    if prebuilt is None:
        tried.append("TRAINOPS_KUBE_PREBUILT: not set (a directory of <component>-<version>.tar.zst)")
    else:
        archive = from_prebuilt(prebuilt, comp, cache, sums, sums_file)
        if archive is not None:
            return f"{comp.name} {comp.version}: from {archive}, checked ({time.monotonic() - start:.1f} s)"
        tried.append(f"TRAINOPS_KUBE_PREBUILT: {absent_note(prebuilt, comp)}")
    if not build:
        tried.append("source build: not tried (--no-build)")
        raise Refused(f"{comp.name} {comp.version} missing; tried " + "; ".join(tried))
    try:
        from_source(comp, cache, sums, sums_file)
    except Refused as exc:
        tried.append(f"source build: {exc}")
        raise Refused(f"{comp.name} {comp.version} missing; tried " + "; ".join(tried)) from None
    return f"{comp.name} {comp.version}: built from source, checked ({time.monotonic() - start:.0f} s)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kube_components.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("components", nargs="*", metavar="COMPONENT", help=f"default: all ({', '.join(COMPONENTS)})")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TRAINOPS_KUBE_CACHE") or DEFAULT_CACHE))
    parser.add_argument("--prebuilt", type=Path, default=os.environ.get("TRAINOPS_KUBE_PREBUILT") or None)
    parser.add_argument("--sums", type=Path, default=SUMS_FILE, help="the pinned sums (default: %(default)s)")
    parser.add_argument("--no-build", action="store_true", help="never build from source")
    parser.add_argument(
        "--carried",
        action="store_true",
        help="only the components the prebuilt directory carries (its archive, or its binaries in the "
        "directory's SHA256SUMS); name the others, which the set-up builds from source",
    )
    args = parser.parse_args(argv)
    unknown = [c for c in args.components if c not in COMPONENTS]
    if unknown:
        parser.error(f"unknown component {unknown[0]} (known: {', '.join(COMPONENTS)})")
    prebuilt = Path(args.prebuilt) if args.prebuilt else None
    failed = 0
    try:
        sums = read_sums(args.sums)
        pins = versions()
    except (OSError, Refused) as exc:
        print(f"kube-components: {exc}", file=sys.stderr)
        return 1
    names = args.components or list(COMPONENTS)
    if args.carried:
        if prebuilt is None:
            parser.error("--carried needs --prebuilt (or TRAINOPS_KUBE_PREBUILT)")
        left = [n for n in names if not carried(prebuilt, component(n, pins))]
        names = [n for n in names if n not in left]
        for name in left:
            comp = component(name, pins)
            note = f"not carried by {prebuilt} (the set-up builds it from source)"
            print(f"kube-components: {comp.name} {comp.version}: {note}", file=sys.stderr)
    for name in names:
        try:
            line = resolve(
                component(name, pins), cache=args.cache, prebuilt=prebuilt, build=not args.no_build,
                sums=sums, sums_file=args.sums,
            )  # fmt: skip
        except Refused as exc:
            failed += 1
            line = str(exc)
        print(f"kube-components: {line}", file=sys.stderr, flush=True)
    if failed:
        print(
            f"kube-components: {failed} component(s) missing: the cluster tests need them "
            "(or set TRAINOPS_SKIP_KUBE=1 to skip those tests)",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
