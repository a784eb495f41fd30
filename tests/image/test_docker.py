"""The docker builder against Podman's Docker-compatible API and the Distribution registry.

The template renders RUN steps that busybox can run (installPytorch/installProject off, a
setupCommand), FROM the session's local busybox image; nothing is pulled.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.image.helpers import git, make_project, manifest_text, run, skopeo_json
from trainops import clock
from trainops_testing import planted
from trainops_testing.cli import run as trainops
from trainops_testing.services import DistributionRegistry, PodmanService

CODE: dict[str, str | bytes] = {
    "app/hello.sh": "#!/bin/sh\necho hello from the docker build\n",
    "app/model.py": "print('model')\n",
    "scratch.txt": "not sent\n",
    ".dockerignore": "scratch.txt\n",
}
SECRET = planted.secret("docker-build-secret")  # what must never show up in the image
SETUP_WITH_SECRET = (
    'test "$HF_TOKEN" = "$(cat /run/secrets/hf_token)" && test -n "$HF_TOKEN" '
    "&& echo secret-seen-by-the-build-step && echo built > /tmp/setup-ran"
)


def build(manifest: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = trainops("image", "build", "-f", str(manifest), "-o", "json", *args)
    assert result.code == code, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def project(tmp_path: Path, registry: str, busybox: str, **kw: Any) -> Path:
    params = {"setupCommand": "echo setup > /tmp/setup-ran", **kw.pop("params", {})}
    return make_project(
        tmp_path / "proj",
        CODE,
        manifest_text(registry=registry, builder="docker", base=busybox, params=params, **kw),
        executable=("app/hello.sh",),
    )


def test_build_push_to_distribution_labels_and_skip(
    tmp_path: Path,
    registry: DistributionRegistry,
    podman: PodmanService,
    podman_env: dict[str, str],
    busybox_image: str,
) -> None:
    namespace = f"d{uuid.uuid4().hex[:8]}"
    manifest = project(tmp_path, f"oci://{registry.host}/{namespace}", busybox_image, insecure=registry.host)
    commit = git(manifest.parent, "rev-parse", "HEAD")
    data = build(manifest, "--push")
    assert (data["builder"], data["skipped"], data["pushed"]) == ("docker", False, True)
    image = f"{registry.host}/{namespace}/demo/image"
    assert data["tags"][1] == commit and data["localImage"] == f"{image}:{data['tags'][0]}"

    info = skopeo_json("inspect", "--tls-verify=false", f"docker://{image}:{commit}", env=podman_env)
    assert info["Digest"] == data["digest"]
    labels = info["Labels"]
    assert labels["org.opencontainers.image.revision"] == commit
    # the label as the image carries it (seconds); -o json shows every time to the millisecond
    assert clock.one_precision(labels["org.opencontainers.image.created"]) == data["created"]
    assert labels["dev.trainops.kind"] == "image" and labels["dev.trainops.inputs"] == data["inputsDigest"]
    assert json.loads(labels["dev.trainops.lineage"])["gitCommit"] == commit
    assert labels["dev.trainops.template"] == "train-pytorch"  # from the Dockerfile's LABEL
    by_inputs = skopeo_json("inspect", "--tls-verify=false", f"docker://{image}:{data['tags'][0]}", env=podman_env)
    assert by_inputs["Digest"] == data["digest"]

    out = podman.podman("run", "--rm", f"{image}:{commit}", "sh", "-c", "cat /tmp/setup-ran; /workspace/app/hello.sh")
    assert out.stdout == "setup\nhello from the docker build\n"
    assert podman.podman("run", "--rm", f"{image}:{commit}", "id", "-u").stdout.strip() == "1000"
    listing = podman.podman("run", "--rm", f"{image}:{commit}", "ls", "-a", "/workspace").stdout.split()
    assert "scratch.txt" not in listing and "app" in listing

    # The engine pushed it, so its lineage is in the config's labels: lineage reads them there.
    walked = trainops("lineage", f"oci://{image}:{commit}", "--insecure", "--format", "json")
    assert walked.code == 0, walked.stderr
    node = json.loads(walked.stdout)["nodes"][0]
    assert (node["kind"], node["gitCommit"], node["created"]) == ("image", commit, data["created"])

    again = trainops("image", "build", "-f", str(manifest), "--push")
    assert again.code == 0, again.stderr
    assert "skipped: inputs unchanged" in again.stderr and "STEP" not in again.stderr
    assert again.stdout.strip() == f"oci://{image}@{data['digest']}"


def test_build_steps_see_secrets_the_image_never_does(
    tmp_path: Path,
    registry: DistributionRegistry,
    podman: PodmanService,
    podman_env: dict[str, str],
    busybox_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)
    namespace = f"s{uuid.uuid4().hex[:8]}"
    manifest = project(
        tmp_path,
        f"oci://{registry.host}/{namespace}",
        busybox_image,
        insecure=registry.host,
        params={"setupCommand": SETUP_WITH_SECRET},
        extra="secrets: [{id: hf_token, env: HF_TOKEN}]\nbuildArgs: {PIP_INDEX_URL: https://pypi.example/simple}",
    )
    result = trainops("image", "build", "-f", str(manifest), "--push")
    assert result.code == 0, result.stderr
    assert "secret-seen-by-the-build-step" in result.stderr  # the step had it
    assert SECRET not in result.stderr + result.stdout  # the log did not
    image = f"{registry.host}/{namespace}/demo/image"
    tag = git(manifest.parent, "rev-parse", "HEAD")

    history = podman.podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", f"{image}:{tag}").stdout
    assert "--mount=type=secret,id=hf_token" in history
    assert SECRET not in history
    config = run(["skopeo", "inspect", "--config", "--tls-verify=false", f"docker://{image}:{tag}"], env=podman_env)
    assert SECRET not in config
    env = json.loads(config)["config"].get("Env", [])
    assert not [e for e in env if e.startswith(("HF_TOKEN=", "PIP_INDEX_URL="))]

    archive = tmp_path / "image.tar"
    podman.podman("save", "--format", "docker-archive", "-o", str(archive), f"{image}:{tag}")
    exported = tmp_path / "exported"
    exported.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(exported)], check=True)
    for layer in exported.rglob("*.tar"):  # every layer, unpacked and searched
        unpacked = tmp_path / "layers" / layer.stem
        unpacked.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xf", str(layer), "-C", str(unpacked)], check=True)
    grep = subprocess.run(["grep", "-r", "-l", "-a", SECRET, str(tmp_path / "layers"), str(exported)], check=False)
    assert grep.returncode == 1, "the secret value is in the exported image"
    listing = podman.podman("run", "--rm", f"{image}:{tag}", "ls", "-a", "/workspace", "/run/secrets").stdout
    assert ".trainops-secret" not in listing


def test_the_docker_builder_pushes_to_a_file_registry_through_trainops(
    tmp_path: Path, podman: PodmanService, podman_env: dict[str, str], busybox_image: str
) -> None:
    registry = tmp_path / "registry"
    manifest = project(tmp_path, f"file://{registry}", busybox_image)
    data = build(manifest, "--push")
    repo = registry / "demo" / "image"
    tag = data["tags"][1]
    raw = skopeo_json("inspect", "--raw", f"oci:{repo}:{tag}")
    assert raw["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert raw["annotations"]["dev.trainops.kind"] == "image"
    assert raw["annotations"]["org.opencontainers.image.revision"] == data["commit"]
    assert raw["config"]["digest"] == data["imageId"]  # the engine's image, unchanged
    out = podman.podman("run", "--rm", f"oci:{repo}:{tag}", "/workspace/app/hello.sh").stdout
    assert out == "hello from the docker build\n"
    lineage = trainops("lineage", f"file://{repo}:{tag}", "--format", "json")
    assert json.loads(lineage.stdout)["nodes"][0]["kind"] == "image"
    again = build(manifest, "--push")
    assert again["skipped"] and again["digest"] == data["digest"]


def test_without_push_the_image_stays_in_the_engine_and_is_reused(
    tmp_path: Path, podman: PodmanService, podman_env: dict[str, str], busybox_image: str
) -> None:
    registry = tmp_path / "registry"
    manifest = project(tmp_path, f"file://{registry}", busybox_image, name=f"local{uuid.uuid4().hex[:6]}")
    first = build(manifest)
    assert not first["pushed"] and first["digest"] is None and not registry.exists()
    assert podman.podman("image", "exists", first["localImage"], check=False).returncode == 0
    second = build(manifest)
    assert second["skipped"] and second["imageId"] == first["imageId"]


def test_build_failures_and_missing_secrets_are_one_line_errors(
    tmp_path: Path, podman_env: dict[str, str], busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = project(tmp_path / "a", f"file://{tmp_path / 'reg'}", busybox_image, params={"setupCommand": "exit 3"})
    result = trainops("image", "build", "-f", str(failing))
    assert result.code == 6
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: the image build failed:") and "fix the step above" in error

    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    secret = project(
        tmp_path / "b",
        f"file://{tmp_path / 'reg'}",
        busybox_image,
        params={"setupCommand": "true"},
        extra="secrets: [{id: tok, env: NO_SUCH_TOKEN}]",
    )
    result = trainops("image", "build", "-f", str(secret))
    assert result.code == 3
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: image.secrets[tok]: environment variable NO_SUCH_TOKEN is not set; "
        "export NO_SUCH_TOKEN before building, or remove the secret"
    )


def test_no_engine_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nothing.sock'}")
    manifest = make_project(
        tmp_path / "proj",
        {"a.txt": "a"},
        manifest_text(registry=f"file://{tmp_path / 'reg'}", builder="docker", base="localhost/x:1"),
    )
    result = trainops("image", "build", "-f", str(manifest))
    assert result.code == 6
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: no container engine answers at unix://{tmp_path}")
    assert "or use the layer builder (--builder layer)" in lines[0]


def test_a_missing_base_image_is_a_one_line_error(
    tmp_path: Path, podman_env: dict[str, str], busybox_image: str
) -> None:
    manifest = project(tmp_path, f"file://{tmp_path / 'reg'}", "localhost/trainops-test/absent:1")
    result = trainops("image", "build", "-f", str(manifest))
    assert result.code == 4
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: base image localhost/trainops-test/absent:1 is not in the engine")


def test_an_engine_without_secret_support_is_refused() -> None:
    """Docker's build endpoint cannot take secrets (no Docker daemon runs here: the rule, checked alone)."""
    from trainops.errors import InputError
    from trainops.image.api import require_secret_support

    with pytest.raises(InputError) as err:
        require_secret_support("docker", "unix:///var/run/docker.sock (docker 27.0)", ["hf_token"])
    assert "mounts secrets (hf_token), which the engine at unix:///var/run/docker.sock" in str(err.value)
    assert "build with Podman's API service" in str(err.value)
    require_secret_support("docker", "unix:///var/run/docker.sock", [])  # no step uses a secret
    require_secret_support("podman", "unix:///run/podman/podman.sock", ["hf_token"])
