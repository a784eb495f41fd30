"""A release tag is never moved or removed by accident, on every backend.

A release (a model artifact `trainops release` made) keeps its tags: `registry tag`,
`push` and `registry copy` onto a tag that names one, and `registry rm` of one, are refused
(exit 5, one line saying what to do, nothing changed) unless `--force --reason TEXT`; a
release the manifest's GitOps repository serves is never removed (exit 5, naming the
commit). `registry tag SRC TAG` takes a bare tag in SRC's repository, as crane does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.registry.conftest import Target, make_tree
from trainops.registry import media, store
from trainops_testing.cli import run

PLACEHOLDER = "registry.example.com/serve-vllm@sha256:" + "0" * 64


def serving_manifest(target: Target, tmp_path: Path) -> Path:
    """A project's trainops.yaml: the target as its registry, a local GitOps repo, serving proj/model."""
    manifest = tmp_path / "project" / "trainops.yaml"
    manifest.parent.mkdir()
    doc = {
        "apiVersion": "trainops.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "proj"},
        "spec": {
            "registry": target.url,
            "gitops": {"repo": "file://.trainops/gitops.git", "branch": "main", "path": "clusters/dev"},
            "rollout": {"engine": "vllm", "model": "proj/model:v1", "pinnedImage": PLACEHOLDER},
        },
    }
    manifest.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return manifest


def target_env(target: Target) -> dict[str, str | None]:
    host = target.url.split("://", 1)[1].split("/", 1)[0] if target.scheme == "oci" else ""
    return {"TRAINOPS_INSECURE_REGISTRIES": host}


def _release(target: Target, tmp_path: Path, tag: str, weights: bytes) -> str:
    """A model artifact as `trainops release` makes it (the release annotation), pushed."""
    src = make_tree(tmp_path / tag, {"model.safetensors": weights, "config.json": b"{}"})
    notes = {media.A_RELEASE_CHECKPOINT: target.ref("proj/checkpoints:step-1@sha256:" + "1" * 64)}
    ref = target.registries.ref(f"proj/model:{tag}")
    return store.push(target.registries, source=src, ref=ref, kind="model", annotations=notes).digest


def _tags(target: Target) -> dict[str, str]:
    from trainops.registry.listing import list_repository

    listing = list_repository(target.registries, ref=target.registries.ref("proj/model"))
    return {
        t.tag: store.resolve(target.registries, ref=target.registries.ref(f"proj/model:{t.tag}")).manifest.digest
        for t in listing.tags
    }


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_release_tags_move_or_go_only_with_force_and_reason(target: Target, tmp_path: Path) -> None:
    v1 = _release(target, tmp_path, "v1", b"one" * 1000)
    v2 = _release(target, tmp_path, "v2", b"two" * 1000)
    ckpt = make_tree(tmp_path / "ckpt", {"model.safetensors": b"ckpt" * 1000})
    checkpoint = store.push(
        target.registries, source=ckpt, ref=target.registries.ref("proj/checkpoints:step-50"), kind="checkpoint"
    ).digest
    env = target_env(target)
    before = _tags(target)
    assert before == {"v1": v1, "v2": v2}
    refusals = [
        ("registry", "tag", target.ref("proj/checkpoints:step-50"), target.ref("proj/model:v2")),
        ("registry", "tag", target.ref("proj/model:v1"), "v2"),  # a bare tag: same repository
        ("push", str(ckpt), target.ref("proj/model:v1"), "--kind", "checkpoint"),
        ("registry", "copy", target.ref("proj/checkpoints:step-50"), target.ref("proj/model:v1")),
        ("registry", "rm", target.ref("proj/model:v1")),
        ("registry", "rm", f"{target.ref('proj/model')}@{v2}"),
        ("registry", "tag", target.ref("proj/model:v1"), "v2", "--force"),  # no reason: usage
    ]
    for args in refusals:
        done = run(*args, env=env)
        expected = 2 if "--force" in args else 5
        assert done.code == expected, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "--force --reason" in done.stderr or "--force needs --reason" in done.stderr
        assert _tags(target) == before, f"{args} changed the release tags"
    # A bare tag that names nothing yet is a new tag in SRC's repository.
    done = run("registry", "tag", target.ref("proj/model:v2"), "latest", env=env)
    assert done.code == 0, done.stderr
    assert _tags(target)["latest"] == v2
    # On purpose: --force --reason, said on stderr.
    done = run("registry", "tag", target.ref("proj/model:v1"), "latest", "--force", "--reason", "roll back", env=env)
    assert done.code == 0, done.stderr
    assert done.stderr.strip().endswith("(forced: roll back)")
    assert _tags(target)["latest"] == v1
    done = run("registry", "rm", target.ref("proj/model:v2"), "--force", "--reason", "bad weights", env=env)
    assert done.code == 0, done.stderr
    assert "v2" not in _tags(target)
    # A checkpoint tag is no release: it moves as before.
    done = run("registry", "tag", target.ref("proj/model:v1"), target.ref("proj/checkpoints:step-50"), env=env)
    assert done.code == 0 and checkpoint != v1


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_a_served_release_is_never_removed(target: Target, tmp_path: Path) -> None:
    v1 = _release(target, tmp_path, "v1", b"one" * 1000)
    manifest = serving_manifest(target, tmp_path)
    env = target_env(target)
    started = run("rollout", "start", "proj/model:v1", "-f", str(manifest), env=env)
    assert started.code == 0, started.stderr
    status = run("rollout", "status", "-f", str(manifest), "-o", "json", env=env)
    commit = __import__("json").loads(status.stdout)["commit"]
    for args in (("proj/model:v1",), (f"proj/model@{v1}",), ("proj/model:v1", "--force", "--reason", "cleanup")):
        done = run("registry", "rm", *args, "-f", str(manifest), env=env)
        assert done.code == 5, done.stderr
        assert len(done.stderr.splitlines()) == 1
        assert f"is served as stable by the GitOps repo (commit {commit[:12]} in clusters/dev-serve)" in done.stderr
        assert _tags(target) == {"v1": v1}
