"""Smoke tests: each service fixture runs a real service that does real work."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urljoin

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from trainops_testing.services import (
    DistributionRegistry,
    MissingDependency,
    MotoS3,
    PodmanService,
    build_image,
    git_env,
    push_image,
    require,
)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _monolithic_upload(registry: DistributionRegistry, repo: str, data: bytes) -> str:
    digest = _digest(data)
    start = requests.post(f"{registry.url}/v2/{repo}/blobs/uploads/", timeout=30)
    assert start.status_code == 202, start.text
    location = urljoin(registry.url, start.headers["Location"])
    sep = "&" if "?" in location else "?"
    put = requests.put(
        f"{location}{sep}digest={digest}",
        data=data,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    assert put.status_code == 201, put.text
    assert put.headers["Docker-Content-Digest"] == digest
    return digest


def _get_blob(registry: DistributionRegistry, repo: str, digest: str) -> bytes:
    resp = requests.get(f"{registry.url}/v2/{repo}/blobs/{digest}", timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.content


# ------------------------------------------------------------------------ helpers


def test_require_names_the_install_command() -> None:
    with pytest.raises(MissingDependency, match=r"^no-such-tool-x not found: apt-get install"):
        require("no-such-tool-x", "apt-get install -y no-such-tool-x")
    assert require("git", "apt-get install -y git").endswith("/git")


# ----------------------------------------------------------------------- registry


def test_registry_monolithic_upload_roundtrip(registry: DistributionRegistry) -> None:
    assert registry.url == f"http://{registry.host}"
    assert registry.host.startswith("127.0.0.1:")
    data = os.urandom(256 * 1024)
    digest = _monolithic_upload(registry, "smoke/blobs", data)

    body = _get_blob(registry, "smoke/blobs", digest)
    assert _digest(body) == digest
    head = requests.head(f"{registry.url}/v2/smoke/blobs/blobs/{digest}", timeout=30)
    assert head.status_code == 200
    assert int(head.headers["Content-Length"]) == len(data)
    # A wrong digest is refused: the registry really verifies what it stores.
    bad = requests.post(f"{registry.url}/v2/smoke/blobs/blobs/uploads/", timeout=30)
    wrong = requests.put(
        urljoin(registry.url, bad.headers["Location"]) + f"&digest={_digest(b'other')}",
        data=data,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    assert wrong.status_code == 400, wrong.text


def test_registry_restart_keeps_blobs_and_port(registry: DistributionRegistry) -> None:
    data = os.urandom(64 * 1024)
    digest = _monolithic_upload(registry, "smoke/restart", data)
    host, old_pid = registry.host, registry.proc.pid if registry.proc else None

    registry.restart()

    assert registry.host == host
    assert registry.proc is not None and registry.proc.pid != old_pid
    assert _get_blob(registry, "smoke/restart", digest) == data
    assert (registry.data_dir / "docker" / "registry" / "v2" / "blobs").is_dir()


def test_registry_upload_survives_restart_midway(registry: DistributionRegistry) -> None:
    """An upload session begun before a restart can be finished after it (fixed secret)."""
    first, second = os.urandom(32 * 1024), os.urandom(32 * 1024)
    start = requests.post(f"{registry.url}/v2/smoke/resume/blobs/uploads/", timeout=30)
    assert start.status_code == 202
    patch = requests.patch(
        urljoin(registry.url, start.headers["Location"]),
        data=first,
        headers={
            "Content-Type": "application/octet-stream",
            "Content-Range": f"0-{len(first) - 1}",
        },
        timeout=30,
    )
    assert patch.status_code == 202, patch.text

    registry.restart()

    location = urljoin(registry.url, patch.headers["Location"])
    status = requests.get(location, timeout=30)
    assert status.status_code == 204, status.text
    assert status.headers["Range"] == f"0-{len(first) - 1}"
    digest = _digest(first + second)
    done = requests.put(
        f"{location}&digest={digest}",
        data=second,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    assert done.status_code == 201, done.text
    assert _get_blob(registry, "smoke/resume", digest) == first + second


# ----------------------------------------------------------------------------- S3


def test_s3_conditional_put(s3_server: MotoS3, s3_bucket: str) -> None:
    # The client is built from the environment alone: s3_bucket's AWS_* variables work.
    assert os.environ["AWS_ENDPOINT_URL"] == s3_server.endpoint_url
    s3 = boto3.client("s3")
    assert s3.list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0

    s3.put_object(Bucket=s3_bucket, Key="tags/latest", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=s3_bucket, Key="tags/latest", Body=b"two", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=s3_bucket, Key="tags/latest")["Body"].read() == b"one"


def test_s3_bucket_is_fresh_per_test(s3_server: MotoS3, s3_bucket: str) -> None:
    s3 = s3_server.client()
    assert s3.list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0
    names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert s3_bucket in names


# ------------------------------------------------------------------------- podman


def test_podman_build_run_push(
    podman: PodmanService,
    registry: DistributionRegistry,
    busybox_image: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "Dockerfile").write_text(f'FROM {busybox_image}\nRUN echo hi > /hello\nRUN test "$(cat /hello)" = hi\n')
    repo = f"{registry.host}/smoke/busybox-hi"
    tag = uuid.uuid4().hex[:8]
    client = podman.client()
    try:
        build_image(client, tmp_path, f"{repo}:{tag}")
        digest = push_image(client, repo, tag)
    finally:
        client.close()
    assert digest.startswith("sha256:")

    # The podman CLI shares the service's storage through podman.env.
    images = podman.podman("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    assert f"{repo}:{tag}" in images
    out = podman.podman("run", "--rm", f"{repo}:{tag}", "cat", "/hello").stdout
    assert out == "hi\n"

    # An independent reader sees the pushed image in the registry.
    inspect = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{repo}:{tag}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=podman.subprocess_env(),
    )
    assert inspect.returncode == 0, inspect.stderr
    info = json.loads(inspect.stdout)
    assert info["Digest"] == digest
    assert info["Name"] == repo
    tags = requests.get(f"{registry.url}/v2/smoke/busybox-hi/tags/list", timeout=30).json()
    assert tag in tags["tags"]


# ---------------------------------------------------------------------------- git


def test_git_remote_clone_commit_push(git_remote: Path, tmp_path: Path) -> None:
    env = git_env()
    head = subprocess.run(
        ["git", "--git-dir", str(git_remote), "symbolic-ref", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert head.stdout.strip() == "refs/heads/main"

    work = tmp_path / "work"
    subprocess.run(
        ["git", "clone", "--quiet", str(git_remote), str(work)],
        check=True,
        env=env,
        capture_output=True,
    )
    (work / "README.md").write_text("hello\n")
    for cmd in (
        ["git", "add", "README.md"],
        ["git", "commit", "--quiet", "-m", "smoke commit"],
        ["git", "push", "--quiet", "origin", "HEAD:refs/heads/main"],
    ):
        subprocess.run(cmd, cwd=work, check=True, env=env, capture_output=True)

    log = subprocess.run(
        ["git", "--git-dir", str(git_remote), "log", "--format=%s"],  # HEAD, i.e. main
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert log.stdout.splitlines() == ["smoke commit"]
