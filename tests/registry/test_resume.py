"""A push (a pull) interrupted at half a large file resumes: the re-run sends (receives) at
most 55 % of it.

A real `trainops push` (`pull`) of one 128 MiB file gets a real SIGINT (Ctrl-C) from
inside itself once half of the file has gone (a hook on its progress callback: the server
is not touched), exits 130, and the same command is run again. What the re-run moves is
measured outside trainops: bytes through a TCP proxy in front of Distribution and moto,
and bytes the process writes (/proc/self/io) for file://. The file pulled is the file pushed.

"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainops.registry import pulling, store
from trainops.registry.context import Registries
from trainops_testing.interrupting import command
from trainops_testing.services import sigint_default
from trainops_testing.tcp_proxy import TcpProxy

SIZE = 128 * 1024 * 1024


@dataclass
class Remote:
    url: str  # the repository, without a tag
    registries: Registries
    env: dict[str, str]  # for the pushing process
    held: Callable[[], int]  # bytes of unfinished uploads the store holds now
    sent: Callable[[], int]  # bytes sent (or written) so far, measured outside trainops
    received: Callable[[], int]  # bytes received (or written) so far, measured outside trainops


def _written() -> int:
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("wchar:"))


@pytest.fixture(params=["file", "oci", "s3"])
def remote(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    env = {**os.environ}
    if request.param == "file":
        root = tmp_path / "registry"
        repo = root / "resume" / "model"

        def held() -> int:
            return sum(p.stat().st_size for p in (repo / ".trainops" / "tmp").glob("*.part"))

        with Registries() as registries:
            yield Remote(f"file://{repo}", registries, env, held, _written, _written)
        return
    if request.param == "oci":
        registry = request.getfixturevalue("registry")
        proxy = TcpProxy(registry.host)
        uploads = registry.data_dir / "docker" / "registry" / "v2" / "repositories" / "resume" / "model" / "_uploads"
        env["TRAINOPS_INSECURE_REGISTRIES"] = proxy.host
        try:
            with Registries(insecure_registries=(proxy.host,)) as registries:
                yield Remote(
                    f"oci://{proxy.host}/resume/model",
                    registries,
                    env,
                    lambda: sum(p.stat().st_size for p in uploads.glob("*/data")),
                    lambda: proxy.sent_up,
                    lambda: proxy.sent_down,
                )
        finally:
            proxy.close()
        return
    bucket = request.getfixturevalue("s3_bucket")
    server = request.getfixturevalue("s3_server")
    proxy = TcpProxy(server.endpoint_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    raw = server.client()

    def parts() -> int:
        total = 0
        for upload in raw.list_multipart_uploads(Bucket=bucket).get("Uploads") or []:
            listed = raw.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            total += sum(int(p["Size"]) for p in listed.get("Parts") or [])
        return total

    try:
        with Registries() as registries:
            yield Remote(
                f"s3://{bucket}/reg/resume/model",
                registries,
                env,
                parts,
                lambda: proxy.sent_up,
                lambda: proxy.sent_down,
            )
    finally:
        proxy.close()


def _interrupted(remote: Remote, after: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**remote.env, "TRAINOPS_TEST_INTERRUPT_AFTER": str(after)}
    cmd = command(*args, "-j", "1")
    return subprocess.run(cmd, env=env, preexec_fn=sigint_default, capture_output=True, text=True, timeout=300)


def test_a_push_interrupted_at_half_a_file_sends_at_most_55_percent_again(remote: Remote, tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    src.mkdir()
    data = os.urandom(SIZE)
    (src / "model.safetensors").write_bytes(data)
    ref = f"{remote.url}:v1"
    done = _interrupted(remote, SIZE // 2, "push", str(src), ref, "--kind", "checkpoint")
    assert done.returncode == 130, done.stderr
    assert "run the same command again to resume" in done.stderr
    held = remote.held()
    before = remote.sent()
    result = store.push(remote.registries, source=src, ref=remote.registries.ref(ref), kind="checkpoint")
    sent = remote.sent() - before
    assert sent <= 0.55 * SIZE, f"the re-run sent {sent / SIZE:.0%} of the file ({held / SIZE:.0%} was held)"
    assert held >= 0.45 * SIZE, f"interrupted with {held / SIZE:.0%} held: the test did not stop it at half"
    pulled = pulling.pull(remote.registries, ref=result.ref, dest=tmp_path / "out")
    got = hashlib.sha256((pulled.dest / "model.safetensors").read_bytes()).hexdigest()
    assert got == hashlib.sha256(data).hexdigest()


def test_a_pull_interrupted_at_half_a_file_receives_at_most_55_percent_again(remote: Remote, tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    src.mkdir()
    data = os.urandom(SIZE)
    (src / "model.safetensors").write_bytes(data)
    pushed = store.push(remote.registries, source=src, ref=remote.registries.ref(f"{remote.url}:v1"), kind="checkpoint")
    dest = tmp_path / "out"
    done = _interrupted(remote, SIZE // 2, "pull", str(pushed.ref), str(dest))
    assert done.returncode == 130, done.stderr
    assert not dest.exists()  # nothing unverified in the destination
    staged = sum(p.stat().st_size for p in tmp_path.glob(".out.trainops-pull-*/*"))
    before = remote.received()
    pulled = pulling.pull(remote.registries, ref=pushed.ref, dest=dest)
    received = remote.received() - before
    assert received <= 0.55 * SIZE, (
        f"the re-run received {received / SIZE:.0%} of the file ({staged / SIZE:.0%} was kept)"
    )
    assert staged >= 0.45 * SIZE, f"interrupted with {staged / SIZE:.0%} kept: the test did not stop it at half"
    got = hashlib.sha256((pulled.dest / "model.safetensors").read_bytes()).hexdigest()
    assert got == hashlib.sha256(data).hexdigest()
    assert not list(tmp_path.glob(".out.trainops-pull-*"))
