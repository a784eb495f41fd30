"""The layer builder against real tools: skopeo reads it, umoci unpacks it, podman runs it.

The base is the session's busybox image, copied into a file:// trainops registry (an OCI
image layout) with skopeo, or pushed to the Distribution registry by podman (a Docker v2
manifest) for the oci:// case. Builds go through the CLI, in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.image.helpers import (
    BASE_REPO,
    Layout,
    blob_path,
    git,
    layer_names,
    make_project,
    manifest_text,
    run,
    skopeo_json,
    write_tree,
)
from trainops_testing import planted
from trainops_testing.cli import run as trainops
from trainops_testing.services import DistributionRegistry, PodmanService, bare_git_repo

CODE: dict[str, str | bytes] = {
    "app/hello.sh": "#!/bin/sh\necho hello from the code layer\n",
    "app/train.py": "print('training')\n",
    "notes.txt": "ignored by .dockerignore\n",
    ".dockerignore": "notes.txt\n",
}
EXECUTABLE = ("app/hello.sh",)


def build(manifest: Path, *args: str) -> dict[str, Any]:
    result = trainops("image", "build", "-f", str(manifest), "-o", "json", *args)
    assert result.code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def project(tmp_path: Path, layout: Layout, **kw: Any) -> Path:
    return make_project(tmp_path / "proj", CODE, manifest_text(registry=layout.url, **kw), executable=EXECUTABLE)


def test_skopeo_reads_umoci_unpacks_and_podman_runs_the_code_layer(
    tmp_path: Path, layout: Layout, podman: PodmanService, podman_env: dict[str, str]
) -> None:
    manifest = project(tmp_path, layout)
    commit = git(manifest.parent, "rev-parse", "HEAD")
    commit_time = int(git(manifest.parent, "log", "-1", "--format=%ct"))
    data = build(manifest, "--push")
    assert (data["builder"], data["skipped"], data["pushed"]) == ("layer", False, True)
    assert data["tags"] == [f"inputs-{data['inputsDigest'][7:]}", commit]
    repo = layout.repo("demo/image")
    assert data["repository"] == f"file://{repo}"

    info = skopeo_json("inspect", f"oci:{repo}:{commit}")
    assert info["Digest"] == data["digest"]
    created = datetime.fromtimestamp(commit_time, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = info["Labels"]
    assert labels["org.opencontainers.image.revision"] == commit
    assert labels["org.opencontainers.image.created"] == created == info["Created"]
    assert labels["dev.trainops.kind"] == "image"
    lineage = json.loads(labels["dev.trainops.lineage"])
    assert lineage["gitCommit"] == commit and lineage["pipeline"] == "demo"
    # relative to spec.registry: an absolute file:// path would differ on another machine
    assert lineage["parents"] == [
        {"digest": data["baseDigest"], "ref": f"{BASE_REPO}:latest", "relation": "derived-from"}
    ]
    assert data["base"] == f"{BASE_REPO}:latest"
    config = skopeo_json("inspect", "--config", f"oci:{repo}:{commit}")
    assert config["config"]["Entrypoint"] == ["/opt/trainops/entrypoint.sh"]
    assert config["config"]["WorkingDir"] == "/workspace"
    assert config["config"]["User"] == "1000:1000"  # the base sets no user: the template's non-root one
    assert "NCCL_DEBUG=WARN" in config["config"]["Env"]
    assert "PATH=/usr/sbin:/usr/bin:/sbin:/bin" in config["config"]["Env"]  # the base's env is kept
    assert config["history"][-1]["created_by"].startswith("trainops image build --builder layer")
    assert len(config["rootfs"]["diff_ids"]) == len(info["Layers"])

    raw = skopeo_json("inspect", "--raw", f"oci:{repo}:{commit}")
    assert raw["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert raw["layers"][-1]["mediaType"] == "application/vnd.oci.image.layer.v1.tar"  # uncompressed
    assert raw["layers"][-1]["digest"] == config["rootfs"]["diff_ids"][-1]
    assert raw["annotations"]["org.opencontainers.image.base.digest"] == data["baseDigest"]

    bundle = tmp_path / "bundle"
    run(["umoci", "unpack", "--image", f"{repo}:{commit}", str(bundle)])
    rootfs = bundle / "rootfs"
    assert (rootfs / "workspace" / "app" / "hello.sh").read_text() == CODE["app/hello.sh"]
    assert os.access(rootfs / "opt" / "trainops" / "entrypoint.sh", os.X_OK)
    assert not (rootfs / "workspace" / "notes.txt").exists()  # .dockerignored
    assert (rootfs / "bin" / "busybox").is_file()  # the base is underneath

    out = podman.podman("run", "--rm", f"oci:{repo}:{commit}", "/workspace/app/hello.sh").stdout
    assert out == "hello from the code layer\n"
    assert podman.podman("run", "--rm", f"oci:{repo}:{commit}", "id", "-u").stdout.strip() == "1000"


def test_same_inputs_same_digest_from_other_directories_and_times(tmp_path: Path, pristine_layout: Path) -> None:
    """Two clones of one commit, with other paths, mtimes and modes, give byte-identical images."""
    origin = make_project(
        tmp_path / "origin", CODE, manifest_text(registry="file://.trainops/registry"), executable=EXECUTABLE
    ).parent
    remote = bare_git_repo(tmp_path / "remote.git")
    git(origin, "push", "-q", str(remote), "main")
    clones = [tmp_path / "a", tmp_path / "somewhere" / "else" / "b"]
    for i, clone in enumerate(clones):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        shutil.copytree(pristine_layout, clone / ".trainops" / "registry")
        if i:  # a different checkout time, and a stricter umask
            for path in (clone / "app").iterdir():
                os.utime(path, (1_000_000 + i, 1_000_000 + i))
            os.chmod(clone / "app" / "train.py", 0o600)
            os.chmod(clone / "app" / "hello.sh", 0o700)  # git tracks only "executable or not"
    a, b = (build(c / "trainops.yaml", "--push") for c in clones)
    assert a["digest"] == b["digest"] and a["inputsDigest"] == b["inputsDigest"]
    assert a["commit"] == b["commit"] and not a["skipped"] and not b["skipped"]

    # the .dockerignored file is not in the code layer
    repo = clones[0] / ".trainops" / "registry" / "demo" / "image"
    raw = skopeo_json("inspect", "--raw", f"oci:{repo}:{a['commit']}")
    names = layer_names(blob_path(repo, raw["layers"][-1]["digest"]))
    assert "workspace/app/hello.sh" in names and "opt/trainops/entrypoint.sh" in names
    assert "workspace/notes.txt" not in names

    # a commit that changes only the ignored file: same inputs, build skipped, commit tag moved
    write_tree(clones[1], {"notes.txt": "edited\n"})
    git(clones[1], "commit", "-q", "-am", "notes only")
    again = build(clones[1] / "trainops.yaml", "--push")
    assert again["skipped"] and again["digest"] == b["digest"] and again["commit"] != b["commit"]
    repo_b = clones[1] / ".trainops" / "registry" / "demo" / "image"
    assert skopeo_json("inspect", f"oci:{repo_b}:{again['commit']}")["Digest"] == b["digest"]

    # one changed context file: another digest
    write_tree(clones[1], {"app/train.py": "print('training, v2')\n"})
    git(clones[1], "commit", "-q", "-am", "code change")
    changed = build(clones[1] / "trainops.yaml", "--push")
    assert not changed["skipped"]
    assert changed["digest"] != b["digest"] and changed["inputsDigest"] != b["inputsDigest"]


def test_a_second_build_of_unchanged_inputs_is_skipped(tmp_path: Path, layout: Layout) -> None:
    manifest = project(tmp_path, layout)
    first = trainops("image", "build", "-f", str(manifest), "--push")
    assert first.code == 0, first.stderr
    assert "built with layer" in first.stderr and "and pushed" in first.stderr
    second = trainops("image", "build", "-f", str(manifest), "--push")
    assert second.code == 0, second.stderr
    assert "skipped: inputs unchanged" in second.stderr and "reusing that image" in second.stderr
    assert second.stdout == first.stdout  # the same repository@digest
    tags = json.loads((layout.repo("demo/image") / "index.json").read_text())["manifests"]
    assert len({t["digest"] for t in tags}) == 1


def test_without_push_nothing_is_written(tmp_path: Path, layout: Layout) -> None:
    manifest = project(tmp_path, layout)
    result = trainops("image", "build", "-f", str(manifest))
    assert result.code == 0, result.stderr
    assert "not pushed (nothing written: pass --push)" in result.stderr
    assert not layout.repo("demo/image").exists()
    pushed = build(manifest, "--push")
    assert result.stdout.strip() == pushed["digest"]  # what --push then wrote


def _add_index(layout: Layout, platforms: list[str]) -> None:
    """Tag base/busybox:multi as an index whose entries all point at the amd64 manifest."""
    from trainops.registry.backends.base import ManifestData, sha256_digest
    from trainops.registry.backends.local import LocalBackend
    from trainops.registry.reference import RegistryRoot

    backend = LocalBackend(RegistryRoot("file", "", "/"))
    repo = str(layout.repo(BASE_REPO))
    base = backend.get_manifest(repo, "latest")
    entries = []
    for text in platforms:
        os_name, arch = text.split("/")
        entries.append(
            {
                "mediaType": base.media_type,
                "digest": base.digest,
                "size": len(base.data),
                "platform": {"os": os_name, "architecture": arch},
            }
        )
    body = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}
    ).encode()
    index = ManifestData(body, "application/vnd.oci.image.index.v1+json", sha256_digest(body))
    backend.put_manifest(repo, index, tag="multi")


def test_an_index_base_resolves_to_the_platforms_manifest(tmp_path: Path, layout: Layout) -> None:
    _add_index(layout, ["linux/arm64", "linux/amd64"])
    manifest = project(tmp_path, layout, base=f"{BASE_REPO}:multi")
    data = build(manifest, "--push")
    plain = skopeo_json("inspect", "--raw", f"oci:{layout.repo(BASE_REPO)}:latest")
    assert data["baseDigest"] != ""  # the amd64 manifest, not the index
    raw = skopeo_json("inspect", "--raw", f"oci:{layout.repo('demo/image')}:{data['tags'][1]}")
    assert [layer["digest"] for layer in raw["layers"][:-1]] == [layer["digest"] for layer in plain["layers"]]

    other = make_project(
        tmp_path / "s390x",
        CODE,
        manifest_text(registry=layout.url, base=f"{BASE_REPO}:multi", extra="platform: linux/s390x"),
    )
    result = trainops("image", "build", "-f", str(other))
    assert result.code == 4
    assert result.stderr.strip().splitlines() == [
        f"Error: file://{layout.repo(BASE_REPO)}:multi has no linux/s390x image; it has linux/amd64, linux/arm64"
    ]
    lying = make_project(
        tmp_path / "arm",
        CODE,
        manifest_text(registry=layout.url, base=f"{BASE_REPO}:multi", extra="platform: linux/arm64"),
    )
    result = trainops("image", "build", "-f", str(lying))
    assert result.code == 3 and "is a linux/amd64 image, not linux/arm64" in result.stderr


def test_docker_v2_base_in_distribution_to_an_oci_registry(
    tmp_path: Path,
    registry: DistributionRegistry,
    podman: PodmanService,
    podman_env: dict[str, str],
    busybox_image: str,
) -> None:
    base = f"{registry.host}/base/bb{uuid.uuid4().hex[:8]}:1"
    podman.podman("push", "--quiet", "--format", "v2s2", busybox_image, base)
    pushed_base = skopeo_json("inspect", "--raw", "--tls-verify=false", f"docker://{base}")
    assert pushed_base["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    namespace = f"t{uuid.uuid4().hex[:8]}"
    manifest = make_project(
        tmp_path / "proj",
        CODE,
        manifest_text(registry=f"oci://{registry.host}/{namespace}", base=base, insecure=registry.host),
        executable=EXECUTABLE,
    )
    data = build(manifest, "--push")
    image = f"{registry.host}/{namespace}/demo/image"
    raw = skopeo_json("inspect", "--raw", "--tls-verify=false", f"docker://{image}:{data['tags'][1]}")
    assert raw["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert raw["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert {layer["mediaType"] for layer in raw["layers"][:-1]} == {"application/vnd.oci.image.layer.v1.tar+gzip"}
    assert [layer["digest"] for layer in raw["layers"][:-1]] == [layer["digest"] for layer in pushed_base["layers"]]
    info = skopeo_json("inspect", "--tls-verify=false", f"docker://{image}:{data['tags'][1]}")
    assert info["Labels"]["org.opencontainers.image.revision"] == data["commit"]
    out = podman.podman("run", "--rm", "--tls-verify=false", f"{image}:{data['tags'][1]}", "/workspace/app/hello.sh")
    assert out.stdout == "hello from the code layer\n"
    again = build(manifest, "--push")
    assert again["skipped"] and again["digest"] == data["digest"]


def test_lineage_shows_the_image_and_its_base(tmp_path: Path, layout: Layout) -> None:
    manifest = project(tmp_path, layout)
    data = build(manifest, "--push")
    ref = f"{data['repository']}:{data['tags'][1]}"
    result = trainops("lineage", ref, "--format", "json", "-f", str(manifest))
    assert result.code == 0, result.stderr
    graph = json.loads(result.stdout)
    nodes = {n["digest"]: n for n in graph["nodes"]}
    assert nodes[data["digest"]]["kind"] == "image"
    assert nodes[data["digest"]]["gitCommit"] == data["commit"]
    assert graph["edges"] == [{"child": data["digest"], "parent": data["baseDigest"], "relation": "derived-from"}]
    down = trainops("lineage", f"{layout.url}/{BASE_REPO}:latest", "--down", "--registry", layout.url)
    assert down.code == 0 and "derived-into: image" in down.stdout  # read walking down: base → image


def test_secrets_are_ignored_but_never_baked(tmp_path: Path, layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    token = planted.secret("layer-build-secret")
    monkeypatch.setenv("HF_TOKEN", token)
    manifest = project(tmp_path, layout, extra="secrets: [{id: hf_token, env: HF_TOKEN}]")
    data = build(manifest, "--push")
    assert data["secretsIgnored"] == ["hf_token"] and data["secretsUsed"] == []
    assert data["notes"] == ["secrets hf_token are not used: the layer builder runs no build steps"]
    text = trainops("image", "build", "-f", str(manifest))
    assert "note: secrets hf_token are not used" in text.stderr

    write_tree(manifest.parent, {".env": f"HF_TOKEN={token}\n"})
    planted.source(manifest.parent / ".env")  # the user's file the build must refuse to bake in
    result = trainops("image", "build", "-f", str(manifest), "--push")
    assert result.code == 3
    assert result.stderr.strip().splitlines() == [
        "Error: the build context file .env contains the value of secret 'hf_token' and would put it in the "
        "image; add .env to .dockerignore or image.exclude, or remove the value from it"
    ]


@pytest.mark.parametrize(
    ("base", "code", "message"),
    [
        (f"{BASE_REPO}:missing", 4, "no tag 'missing' in"),
        ("nothing/here:1", 4, "no repository at"),
        ("artifacts/data:v1", 3, "is not a container image: its config is application/vnd.trainops.config.v1+json"),
    ],
)
def test_bad_bases_are_one_line_errors(tmp_path: Path, layout: Layout, base: str, code: int, message: str) -> None:
    data_dir = write_tree(tmp_path / "data", {"x.txt": "x"})
    pushed = trainops("push", str(data_dir), f"{layout.url}/artifacts/data:v1")
    assert pushed.code == 0, pushed.stderr
    manifest = project(tmp_path, layout, base=base)
    result = trainops("image", "build", "-f", str(manifest))
    assert result.code == code, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_the_layer_builder_needs_a_base(tmp_path: Path, layout: Layout) -> None:
    manifest = project(tmp_path, layout, builder="docker", base=None)
    result = trainops("image", "build", "-f", str(manifest), "--builder", "layer")
    assert result.code == 3
    assert result.stderr.startswith("Error: the layer builder appends to a base image: set image.base;")


def test_outside_git_the_image_has_only_the_inputs_tag(tmp_path: Path, layout: Layout) -> None:
    manifest = make_project(tmp_path / "proj", CODE, manifest_text(registry=layout.url), commit=False)
    data = build(manifest, "--push")
    assert data["commit"] is None and data["tags"] == [f"inputs-{data['inputsDigest'][7:]}"]
    assert data["created"] == "1970-01-01T00:00:00.000Z"  # SOURCE_DATE_EPOCH 0, as -o json shows times
    labels = skopeo_json("inspect", f"oci:{layout.repo('demo/image')}:{data['tags'][0]}")["Labels"]
    assert "org.opencontainers.image.revision" not in labels
