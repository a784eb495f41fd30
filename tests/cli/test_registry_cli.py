"""The registry commands end to end on a local registry: push, pull, ls, show, tag, diff, copy, rm, gc, lineage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.registry.conftest import make_tree
from trainops_testing.cli import run


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory whose trainops.yaml names a local registry; the cwd for each test."""
    (tmp_path / "trainops.yaml").write_text(
        "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: p}\n"
        "spec: {registry: file://.trainops/registry}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    make_tree(tmp_path / "ckpt1", {"model.safetensors": b"a" * 1000, "state.json": b'{"step": 1}'})
    make_tree(tmp_path / "ckpt2", {"model.safetensors": b"b" * 1000, "state.json": b'{"step": 2}', "new.md": b"#"})
    return tmp_path


def _json(*args: str) -> dict[str, object]:
    out = run(*args, "-o", "json")
    assert out.code == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_push_prints_the_digest_and_pull_restores(project: Path) -> None:
    out = run("push", "ckpt1", "p/ckpt:1", "--kind", "checkpoint", "--step", "1", "--metric", "val_loss=2.5")
    assert out.code == 0, out.stderr
    digest = out.stdout.strip()
    assert digest.startswith("sha256:") and len(digest) == 71
    assert (project / ".trainops/registry/p/ckpt/oci-layout").is_file()
    pulled = _json("pull", "p/ckpt:1", "out")
    assert pulled["digest"] == digest
    assert (project / "out/model.safetensors").read_bytes() == b"a" * 1000


def test_ls_show_tag_diff_rm(project: Path) -> None:
    run("push", "ckpt1", "p/ckpt:1", "--kind", "checkpoint", "--step", "1")
    run(
        "push",
        "ckpt2",
        "p/ckpt:2",
        "--kind",
        "checkpoint",
        "--step",
        "2",
        "--parent",
        "p/ckpt:1",
        "--annotation",
        "team=llm",
    )
    repos = _json("registry", "ls")
    assert repos["repositories"] == [f"file://{project}/.trainops/registry/p/ckpt"]
    tags = _json("registry", "ls", "p/ckpt")
    assert [t["tag"] for t in tags["tags"]] == ["1", "2"]  # type: ignore[index, union-attr]
    info = _json("registry", "show", "p/ckpt:2")
    assert info["kind"] == "checkpoint" and info["lineage"] == {"step": 2, "metrics": {}}
    assert info["annotations"]["team"] == "llm"  # type: ignore[index]
    assert [p["relation"] for p in info["parents"]] == ["parent"]  # type: ignore[union-attr, index]
    text = run("registry", "show", "p/ckpt:2")
    assert "model.safetensors" in text.stdout and "parent:" in text.stdout
    assert run("registry", "tag", "p/ckpt:2", "p/ckpt:best").code == 0
    change = _json("registry", "diff", "p/ckpt:1", "p/ckpt:best")
    assert [c["path"] for c in change["added"]] == ["new.md"]  # type: ignore[union-attr, index]
    assert [c["path"] for c in change["modified"]] == ["model.safetensors", "state.json"]  # type: ignore[union-attr, index]
    assert run("registry", "rm", "p/ckpt:best").code == 0
    missing = run("registry", "show", "p/ckpt:best")
    assert missing.code == 4 and missing.stderr.startswith("Error: no tag 'best'")


def test_copy_and_gc(project: Path, tmp_path: Path) -> None:
    run("push", "ckpt1", "p/ckpt:1", "--kind", "checkpoint")
    run("push", "ckpt2", "p/ckpt:1", "--kind", "checkpoint")  # the tag moves; the first is untagged
    copied = _json("registry", "copy", "p/ckpt:1", f"file://{tmp_path}/mirror/p/ckpt")
    assert copied["dst"].endswith(f"mirror/p/ckpt:1@{copied['digest']}")  # type: ignore[union-attr]
    dry = _json("registry", "gc", "--dry-run")
    assert len(dry["removedManifests"]) == 1  # type: ignore[arg-type]
    done = run("registry", "gc")
    assert done.code == 0 and "removed 1 artifact(s)" in done.stdout
    assert _json("registry", "gc")["removedManifests"] == []


def test_lineage_formats(project: Path) -> None:
    run("push", "ckpt1", "p/ckpt:1", "--kind", "checkpoint", "--step", "1")
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'  # a model's headers are read at push
    make_tree(project / "model", {"model.safetensors": len(header).to_bytes(8, "little") + header + bytes(8)})
    assert run("push", "model", "p/model:v1", "--kind", "model", "--parent", "p/ckpt:1").code == 0
    tree = run("lineage", "p/model:v1", env={"COLUMNS": "400"})  # a line a node, not folded
    assert tree.code == 0
    lines = tree.stdout.splitlines()
    assert lines[0].startswith("model ") and lines[1].startswith("└── parent: checkpoint ")
    graph = json.loads(run("lineage", "p/ckpt:1", "--down", "--format", "json").stdout)
    assert {n["kind"] for n in graph["nodes"]} == {"checkpoint", "model"}
    assert run("lineage", "p/model:v1", "--format", "mermaid").stdout.startswith("graph BT")
    assert run("lineage", "p/model:v1", "--format", "dot").stdout.startswith("digraph lineage")


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("push", "ckpt1", "p/ckpt@sha256:" + "0" * 64), 3, "cannot push to a digest"),
        (("push", "ckpt1", "p/ckpt:1", "--metric", "loss=high"), 2, "--metric values must be numbers"),
        (("push", "ckpt1", "p/ckpt:1", "--annotation", "novalue"), 2, "must be KEY=VALUE"),
        (("push", "ckpt1", "p/ckpt:1", "--parent", "p/none:1"), 4, "no repository"),
        (("pull", "p/none:1", "out"), 4, "no repository"),
        (("pull", "oci://host/UPPER", "out"), 3, "not a valid reference"),
        (("registry", "ls", "p/nothing"), 4, "nothing at"),
        (("registry", "rm", "p/ckpt"), 3, "names neither a tag nor a digest"),
    ],
)
def test_errors_are_one_line_with_a_code(project: Path, args: tuple[str, ...], code: int, fragment: str) -> None:
    run("push", "ckpt1", "p/ckpt:seed", "--kind", "checkpoint")
    out = run(*args)
    assert out.code == code, out.stderr
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1
    assert not (project / "out").exists()


def test_short_reference_without_a_manifest_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = run("pull", "p/ckpt:1", "out")
    assert out.code == 2 and "names no registry" in out.stderr  # a usage mistake, as "no registry given" is
