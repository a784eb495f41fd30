"""scripts/kube_components.py on synthetic archives and a synthetic pinned-sums file: a good
archive lands in bin/, checked; every bad input (a tampered binary, a truncated archive, a
missing member, another version's archive, no archive, an unwritable cache, a cached binary
that differs) is one line naming the file, exit 1, and the cache exactly as it was."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from trainops_testing.kube_bins import COMPONENTS, versions

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "kube_components.py"
ETCD = f"etcd-{versions()['ETCD_VERSION']}"
K8S = versions()["KUBERNETES_VERSION"]


def _tar_zst(path: Path, members: dict[str, bytes]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(["zstd", "-q", "-o", str(path)], input=buf.getvalue(), check=True)
    return path


def _sums(path: Path, members: dict[str, bytes]) -> Path:
    lines = [f"{hashlib.sha256(data).hexdigest()}  {name}" for name, data in members.items()]
    path.write_text("# synthetic pins\n" + "\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), "--cache", str(cache or tmp_path / "cache"), "--no-build", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    """A prebuilt directory, a pinned-sums file for etcd's synthetic binary, and a cache that
    already holds an unrelated binary."""
    binaries = {ETCD: b"#!/bin/sh\necho etcd\n" * 1000}
    prebuilt = tmp_path / "prebuilt"
    prebuilt.mkdir()
    sums = _sums(tmp_path / "sums.txt", binaries)
    (tmp_path / "cache" / "bin").mkdir(parents=True)
    (tmp_path / "cache" / "bin" / "other-v1").write_bytes(b"kept")
    return prebuilt, sums, binaries


def _refused(tmp_path: Path, prebuilt: Path, sums: Path, *names: str) -> str:
    before = _snapshot(tmp_path / "cache")
    result = _run(tmp_path, "--prebuilt", str(prebuilt), "--sums", str(sums), *(names or ("etcd",)))
    assert result.returncode == 1, result.stderr
    assert _snapshot(tmp_path / "cache") == before  # nothing half-extracted, nothing left behind
    assert "Traceback" not in result.stderr
    return result.stderr.splitlines()[0]


def test_a_good_archive_lands_in_bin_checked_and_a_second_run_finds_it(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, binaries = setup
    _tar_zst(prebuilt / f"{ETCD}.tar.zst", binaries)
    result = _run(tmp_path, "--prebuilt", str(prebuilt), "--sums", str(sums), "etcd")
    assert result.returncode == 0, result.stderr
    assert f"from {prebuilt}/{ETCD}.tar.zst, checked" in result.stderr
    installed = tmp_path / "cache" / "bin" / ETCD
    assert installed.read_bytes() == binaries[ETCD] and installed.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["bin"]  # no staging left
    again = _run(tmp_path, "--sums", str(sums), "etcd")  # no prebuilt directory: the cache answers
    assert again.returncode == 0 and f"in {tmp_path / 'cache' / 'bin'}, checked" in again.stderr


def test_a_tampered_binary_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, binaries = setup
    archive = _tar_zst(prebuilt / f"{ETCD}.tar.zst", {ETCD: binaries[ETCD] + b"x"})
    line = _refused(tmp_path, prebuilt, sums)
    assert line.startswith(f"kube-components: {archive}: {ETCD} has sha256 ")
    assert line.endswith(f"{sums} pins {hashlib.sha256(binaries[ETCD]).hexdigest()[:16]}…: refused")


def test_a_truncated_archive_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, _ = setup
    archive = _tar_zst(prebuilt / f"{ETCD}.tar.zst", {ETCD: bytes(range(256)) * 4000})
    _sums(sums, {ETCD: bytes(range(256)) * 4000})
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    line = _refused(tmp_path, prebuilt, sums)
    assert line.startswith(f"kube-components: {archive}: truncated or corrupt (")
    assert line.endswith("): refused")


def test_a_missing_member_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, _ = setup
    members = {f"{b}-{K8S}": b.encode() for b in COMPONENTS["kubernetes"][1] if b != "kubectl"}
    archive = _tar_zst(prebuilt / f"kubernetes-{K8S}.tar.zst", members)
    _sums(sums, {**members, f"kubectl-{K8S}": b"kubectl"})
    line = _refused(tmp_path, prebuilt, sums, "kubernetes")
    assert line == f"kube-components: {archive}: kubectl-{K8S} missing from it: refused"


def test_an_archive_of_another_version_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, _ = setup
    archive = _tar_zst(prebuilt / f"{ETCD}.tar.zst", {"etcd-v0.0.1": b"old"})
    line = _refused(tmp_path, prebuilt, sums)
    assert line == f"kube-components: {archive}: holds 'etcd-v0.0.1', not {ETCD} (another version?): refused"
    archive.unlink()
    _tar_zst(prebuilt / "etcd-v0.0.1.tar.zst", {"etcd-v0.0.1": b"old"})
    line = _refused(tmp_path, prebuilt, sums)
    assert line.startswith(f"kube-components: {ETCD.replace('-', ' ', 1)} missing; tried cache ")
    assert f"{prebuilt}/{ETCD}.tar.zst absent (it has etcd-v0.0.1.tar.zst: another version;" in line
    assert line.endswith("source build: not tried (--no-build)")


def test_a_missing_archive_says_what_was_tried(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, _ = setup
    line = _refused(tmp_path, prebuilt, sums)
    assert line == (
        f"kube-components: {ETCD.replace('-', ' ', 1)} missing; tried cache {tmp_path}/cache/bin: absent; "
        f"TRAINOPS_KUBE_PREBUILT: {prebuilt}/{ETCD}.tar.zst absent; source build: not tried (--no-build)"
    )


def test_an_unwritable_cache_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, binaries = setup
    _tar_zst(prebuilt / f"{ETCD}.tar.zst", binaries)
    (tmp_path / "file").write_text("not a directory")
    cache = tmp_path / "file" / "cache"  # even root cannot make a directory under a file
    result = _run(tmp_path, "--prebuilt", str(prebuilt), "--sums", str(sums), "etcd", cache=cache)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == (
        f"kube-components: {cache}/bin: cannot write to the cache (Not a directory): "
        "run as root or point TRAINOPS_KUBE_CACHE at a writable directory"
    )


def test_a_cached_binary_that_differs_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, binaries = setup
    _tar_zst(prebuilt / f"{ETCD}.tar.zst", binaries)
    (tmp_path / "cache" / "bin" / ETCD).write_bytes(b"built by hand")
    line = _refused(tmp_path, prebuilt, sums)
    assert line.startswith(f"kube-components: {tmp_path}/cache/bin/{ETCD}: {ETCD} has sha256 ")


def test_a_binary_without_a_pinned_sum_is_refused(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, binaries = setup
    archive = _tar_zst(prebuilt / f"{ETCD}.tar.zst", binaries)
    sums.write_text("")
    line = _refused(tmp_path, prebuilt, sums)
    assert line == f"kube-components: {archive}: {ETCD} has no pinned sum in {sums}: refused"


def test_a_malformed_sums_file_is_one_line(tmp_path: Path, setup: tuple) -> None:
    prebuilt, sums, _ = setup
    sums.write_text("# pins\nnot-a-sum etcd\n")
    line = _refused(tmp_path, prebuilt, sums)
    assert line == f"kube-components: {sums}:2: not a sha256sum line: 'not-a-sum etcd'"


def test_the_repository_pins_every_binary_of_every_component() -> None:
    """scripts/kube-sums.txt has a sum for each binary at its pinned version, and nothing else."""
    sums = {line.split("  ")[1] for line in (REPO / "scripts" / "kube-sums.txt").read_text().splitlines()
            if line and not line.startswith("#")}  # fmt: skip
    pins = versions()
    expected = {f"{b}-{pins[key]}" for key, binaries in COMPONENTS.values() for b in binaries}
    assert sums == expected


def test_carried_checks_what_the_prebuilt_directory_carries_and_names_the_rest(tmp_path: Path, setup: tuple) -> None:
    """--carried (what .ci/run checks): etcd's archive is there and is checked; a component
    named in the directory's SHA256SUMS but without its archive is a fault; every other
    component is named as built from source."""
    prebuilt, sums, binaries = setup
    _tar_zst(prebuilt / f"{ETCD}.tar.zst", binaries)
    _sums(sums, binaries)
    cache = tmp_path / "cache"
    result = _run(tmp_path, "--prebuilt", str(prebuilt), "--sums", str(sums), "--carried", cache=cache)
    lines = result.stderr.splitlines()
    assert result.returncode == 0, result.stderr
    assert any(line.startswith(f"kube-components: {ETCD.replace('-', ' ', 1)}: from ") for line in lines), lines
    assert (cache / "bin" / ETCD).read_bytes() == binaries[ETCD]
    others = [name for name in COMPONENTS if name != "etcd"]
    for name in others:
        assert any(line.startswith(f"kube-components: {name} ") and "not carried by" in line for line in lines), name
    (prebuilt / "SHA256SUMS").write_text(f"{'0' * 64}  kwok-{versions()['KWOK_VERSION']}\n")
    result = _run(tmp_path, "--prebuilt", str(prebuilt), "--sums", str(sums), "--carried", cache=tmp_path / "c2")
    assert result.returncode == 1, result.stderr
    assert any(
        line.startswith("kube-components: kwok ") and "missing; tried" in line for line in result.stderr.splitlines()
    )
