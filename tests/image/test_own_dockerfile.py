"""image.dockerfile: a team's own Dockerfile, built by the docker builder on Podman's API with
the context at the build's root, build args and build secrets as for templates."""

from __future__ import annotations

import json
from pathlib import Path

from tests.image.helpers import make_project
from trainops_testing.cli import run as trainops
from trainops_testing.planted import secret
from trainops_testing.services import PodmanService

SECRET = secret("own-dockerfile-token")  # planted: the last test looks for it everywhere
DOCKERFILE = """FROM {base} AS runtime
ARG GREETING
COPY app/ /srv/app/
RUN --mount=type=secret,id=token wc -c < /run/secrets/token > /srv/secret-bytes && echo "$GREETING" > /srv/greeting
"""


def _manifest(registry: str, *, dockerfile: str, builder: str = "docker", base: str | None = None) -> str:
    lines = [
        "apiVersion: trainops.dev/v1alpha1",
        "kind: Pipeline",
        "metadata: {name: own}",
        "spec:",
        f"  registry: {registry}",
        "  image:",
        f"    builder: {builder}",
        f"    dockerfile: {dockerfile}",
        "    buildArgs: {GREETING: hello-from-own}",
        "    secrets: [{id: token, env: OWN_TOKEN}]",
    ]
    if base:
        lines.append(f"    base: {base}")
    return "\n".join(lines) + "\n"


def test_own_dockerfile_builds_with_context_args_and_secrets(
    tmp_path: Path, podman: PodmanService, podman_env: dict[str, str], busybox_image: str, monkeypatch: object
) -> None:
    files: dict[str, str | bytes] = {
        "docker/train.Dockerfile": DOCKERFILE.format(base=busybox_image),
        "app/run.sh": "echo run\n",
    }
    manifest = make_project(
        tmp_path / "proj", files, _manifest("file://.trainops/registry", dockerfile="docker/train.Dockerfile")
    )
    rendered = trainops("image", "render", "-f", str(manifest))
    assert rendered.code == 0 and rendered.stdout.startswith(f"FROM {busybox_image} AS runtime"), rendered.stderr
    built = trainops("image", "build", "-f", str(manifest), "-o", "json", env={"OWN_TOKEN": SECRET})
    assert built.code == 0, built.stderr
    data = json.loads(built.stdout)
    assert data["template"] == "dockerfile docker/train.Dockerfile" and data["secretsUsed"] == ["token"]
    out = podman.podman(
        "run", "--rm", data["localImage"], "sh", "-c", "cat /srv/greeting /srv/app/run.sh /srv/secret-bytes"
    )
    assert out.stdout.split() == ["hello-from-own", "echo", "run", str(len(SECRET))]  # the build step saw it
    history = podman.podman("history", "--no-trunc", data["localImage"]).stdout
    assert SECRET not in history


def test_own_dockerfile_bad_input_is_one_line(tmp_path: Path) -> None:
    outside = make_project(
        tmp_path / "a", {"x.txt": "x\n"}, _manifest("file://.trainops/registry", dockerfile="../elsewhere/Dockerfile")
    )
    done = trainops("image", "render", "-f", str(outside))
    assert done.code == 3 and done.last_error_line.startswith(
        "Error: image.dockerfile ../elsewhere/Dockerfile is outside"
    )
    templated = make_project(
        tmp_path / "b",
        {"Dockerfile": "ARG BASE\nFROM $BASE\n"},
        _manifest("file://.trainops/registry", dockerfile="Dockerfile"),
    )
    done = trainops("image", "render", "-f", str(templated))
    assert done.code == 3 and "set image.base" in done.last_error_line
    layer = make_project(
        tmp_path / "c",
        {"Dockerfile": "FROM busybox\n"},
        _manifest("file://.trainops/registry", dockerfile="Dockerfile", builder="layer", base="base/busybox:latest"),
    )
    done = trainops("validate", "-f", str(layer))
    assert done.code == 3 and "the layer builder runs no Dockerfile" in done.stderr
