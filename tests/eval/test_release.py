"""`trainops release create/ls/show` on a file:// registry with small real checkpoints:
gates (never evaluated, failed, tightened), choosing best/latest among passing evals,
forced releases (reason and who in lineage and annotations), immutable tags, the ModelPack
config, release.export, and the lineage walk release ← eval ← checkpoint."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.eval.conftest import PYTHON, Project
from trainops.registry import media, pulling
from trainops.registry.store import resolve

EVALCMD = Path(__file__).resolve().parent / "evalcmd.py"
EXPORT = """
import json, os, pathlib, shutil
src = pathlib.Path(os.environ["TRAINOPS_EXPORT_INPUT"])
out = pathlib.Path(os.environ["TRAINOPS_EXPORT_OUTPUT"])
assert not any(out.iterdir())
shutil.copy(src / "model.safetensors", out / "model.safetensors")
(out / "config.json").write_text(json.dumps({"architectures": ["TinyForCausalLM"], "model_type": "tiny"}))
(out / "notes.txt").write_text("left out by release.include")
"""


def setup(project: Project, *, release: dict[str, Any] | None = None, steps: tuple[int, ...] = (1, 2, 3)) -> None:
    shutil.copy(EVALCMD, project.root / "evalcmd.py")
    (project.root / "export.py").write_text(EXPORT)
    for step in steps:  # the loss falls, then rises: step 2 is the best
        project.push_checkpoint(step, metrics={"loss": {1: 3.0, 2: 1.0, 3: 2.0}.get(step, 5.0)})
    project.write(
        {
            "image": {"template": "train-pytorch"},
            "train": {
                "scheduler": "local",
                "gpusPerNode": 0,
                "command": [PYTHON, "-c", "pass"],
                "checkpoint": {"keep": {"last": 3, "best": 1, "metric": "loss", "mode": "min"}},
            },
            "eval": {
                "command": [PYTHON, "evalcmd.py", "ok"],
                "gates": [{"metric": "score", "op": ">=", "value": 0.5}],
            },
            "release": {"source": "best", "tag": "v1-step-{step}", **(release or {})},
        },
        environments={"strict": {"eval": {"gates": [{"metric": "score", "op": ">=", "value": 0.95}]}}},
    )


def released(project: Project, *args: str) -> dict[str, Any]:
    out = project.trainops("release", "create", *args, "-o", "json")
    assert out.code == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def model_config(project: Project, ref: str) -> dict[str, Any]:
    with project.registries() as regs:
        found = resolve(regs, ref=regs.ref(ref))
        assert found.parsed.config is not None
        with regs.backend(found.ref).open_blob(found.ref.repository, found.parsed.config.digest) as fh:
            body: dict[str, Any] = json.loads(fh.read())
    return body


def test_never_evaluated_is_refused_with_exit_8(local_project: Project) -> None:
    setup(local_project)
    out = local_project.trainops("release", "create", "step-2")
    assert out.code == 8
    assert "has no passing eval: never evaluated" in out.last_error_line
    best = local_project.trainops("release", "create")
    assert best.code == 8 and "step-2: never evaluated" in best.last_error_line
    assert local_project.trainops("release", "ls", "-o", "json").stdout.strip() in ("[]", "")


def test_best_with_a_passing_eval_becomes_a_modelpack_model(local_project: Project) -> None:
    setup(local_project)
    for step in (1, 3):  # step 2, the best by loss, is not evaluated: it is not eligible
        assert local_project.trainops("eval", "run", f"step-{step}").code == 0
    result = released(local_project)
    assert result["version"] == "v1-step-3" and ":step-3@" in result["checkpoint"]
    assert result["created"] is True and result["forced"] is None
    assert result["files"] == ["model.safetensors", "trainer_state.json"]  # optimizer* excluded
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        evals = resolve(regs, ref=regs.ref(result["eval"]))
    assert found.parsed.artifact_type == media.MODEL_ARTIFACT
    assert {layer.media_type for layer in found.parsed.layers} == {media.WEIGHT_RAW, media.WEIGHT_CONFIG_RAW}
    relations = [(p.relation, p.digest) for p in found.parsed.lineage().parents]
    assert relations == [
        ("released-from", result["checkpoint"].split("@")[1]),
        ("evaluated-by", evals.manifest.digest),
    ]
    config = model_config(local_project, result["ref"])
    # 64×32 float32 + 8 float16 = 2056 parameters, fp32 dominant, read from the header
    assert config["config"] == {"format": "safetensors", "paramSize": "2.1k", "precision": "fp32"}
    assert config["descriptor"]["version"] == "v1-step-3"
    # then step 2 passes an eval too, and becomes the best
    assert local_project.trainops("eval", "run", "step-2").code == 0
    assert released(local_project)["version"] == "v1-step-2"
    assert local_project.trainops("release", "create", "--env", "strict").code == 8


def test_latest_and_require_gates_false(local_project: Project) -> None:
    setup(local_project, release={"source": "latest"})
    assert local_project.trainops("eval", "run", "step-2").code == 0
    assert released(local_project)["version"] == "v1-step-2"  # the newest with a passing eval
    local_project.write(
        {
            "image": {"template": "train-pytorch"},
            "train": {
                "scheduler": "local",
                "command": [PYTHON, "-c", "pass"],
                "gpusPerNode": 0,
                "checkpoint": {"keep": {"metric": "loss"}},
            },
            "release": {"source": "latest", "tag": "free-{step}", "requireGates": False},
        }
    )
    free = released(local_project)
    assert free["version"] == "free-3" and free["eval"] is None and free["forced"] is None


def test_a_failed_eval_refuses_naming_the_gate_and_force_records_reason_and_who(
    local_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(local_project)
    assert local_project.trainops("eval", "run", "step-2", "--env", "strict").code == 8
    refused = local_project.trainops("release", "create", "step-2", "--env", "strict")
    assert refused.code == 8 and "score >= 0.95: actual 0.9" in refused.last_error_line
    no_reason = local_project.trainops("release", "create", "step-2", "--force")
    assert no_reason.code == 2 and "--reason" in no_reason.last_error_line
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("USER", "alice")
    forced = released(local_project, "step-2", "--env", "strict", "--force", "--reason", "demo for the board")
    assert forced["forced"] == {"reason": "demo for the board", "by": "alice"} and forced["eval"] is None
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(forced["ref"]))
    line = found.parsed.lineage()
    assert line.forced is not None and (line.forced.reason, line.forced.by) == ("demo for the board", "alice")
    notes = found.parsed.annotations
    assert notes["dev.trainops.release.forced"] == "true" and notes["dev.trainops.release.by"] == "alice"
    assert notes["dev.trainops.release.reason"] == "demo for the board"
    shown = json.loads(local_project.trainops("release", "show", forced["ref"], "-o", "json").stdout)
    assert (shown["forced"], shown["by"], shown["reason"]) == (True, "alice", "demo for the board")
    # registry show prints the recorded override (a dict of strings, not metrics) for people
    text = local_project.trainops("registry", "show", forced["ref"])
    assert text.code == 0 and "  forced:   reason=demo for the board by=alice" in text.stdout.splitlines()


def test_who_is_the_git_user_when_git_knows_one(local_project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    setup(local_project)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    subprocess.run(["git", "init", "-q", str(local_project.root)], check=True)
    for key, value in (("user.name", "Ann Lee"), ("user.email", "ann@example.com")):
        subprocess.run(["git", "-C", str(local_project.root), "config", key, value], check=True)
    forced = released(local_project, "step-1", "--force", "--reason", "hotfix")
    assert forced["forced"]["by"] == "Ann Lee <ann@example.com>"


def test_a_release_tag_is_never_moved(local_project: Project) -> None:
    setup(local_project)
    for step in (1, 2):
        assert local_project.trainops("eval", "run", f"step-{step}").code == 0
    first = released(local_project, "step-1", "--version", "v1")
    again = released(local_project, "step-1", "--version", "v1", "--force", "--reason", "retry")
    assert again["digest"] == first["digest"] and again["created"] is False
    assert again["forced"] is None and again["eval"] == first["eval"]  # as it was made, not as asked
    other = local_project.trainops("release", "create", "step-2", "--version", "v1")
    assert other.code == 5
    assert "exists with other content" in other.last_error_line and "never moved" in other.last_error_line
    with local_project.registries() as regs:
        assert resolve(regs, ref=regs.ref("tiny-llm/model:v1")).manifest.digest == first["digest"]
    listed = json.loads(local_project.trainops("release", "ls", "-o", "json").stdout)
    assert [(r["version"], r["digest"]) for r in listed] == [("v1", first["digest"])]


def test_export_converts_before_packaging(local_project: Project) -> None:
    setup(local_project, release={"export": [PYTHON, "export.py"], "requireGates": False})
    result = released(local_project, "step-2")
    assert result["files"] == ["config.json", "model.safetensors"]
    assert result["model"]["architecture"] == "TinyForCausalLM"
    assert model_config(local_project, result["ref"])["config"]["architecture"] == "TinyForCausalLM"


def test_a_failing_export_is_exit_9_and_releases_nothing(local_project: Project) -> None:
    setup(local_project, release={"export": [PYTHON, "-c", "raise SystemExit(4)"], "requireGates": False})
    out = local_project.trainops("release", "create", "step-2")
    assert out.code == 9 and "release.export exited 4" in out.last_error_line
    assert json.loads(local_project.trainops("release", "ls", "-o", "json").stdout) == []


def test_lineage_walks_release_eval_checkpoint(local_project: Project) -> None:
    setup(local_project)
    assert local_project.trainops("eval", "run", "step-2").code == 0
    result = released(local_project)
    out = local_project.trainops("lineage", result["ref"], "--format", "json")
    graph = json.loads(out.stdout)
    kinds = {n["digest"]: n["kind"] for n in graph["nodes"]}
    edges = {(kinds[e["child"]], e["relation"], kinds[e["parent"]]) for e in graph["edges"]}
    assert edges == {
        ("model", "released-from", "checkpoint"),
        ("model", "evaluated-by", "eval"),
        ("eval", "evaluated", "checkpoint"),
    }


def push_image(project: Project, commit: str) -> str:
    """A minimal OCI image (no layers) in tiny-llm/image whose labels carry its lineage, as
    the image builders write it; its digest."""
    from trainops.registry.artifact import canonical_json
    from trainops.registry.backends.base import ManifestData, sha256_digest
    from trainops.registry.store import bytes_source

    lineage = json.dumps({"gitCommit": commit, "pipeline": "tiny-llm"})
    config = canonical_json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {"dev.trainops.lineage": lineage, "org.opencontainers.image.revision": commit}},
            "rootfs": {"type": "layers", "diff_ids": []},
        }
    )
    blob = bytes_source(config)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": media.OCI_MANIFEST,
            "config": {"mediaType": media.IMAGE_CONFIGS[0], "digest": blob.digest, "size": blob.size},
            "layers": [],
        }
    )
    with project.registries() as regs:
        repo = regs.ref("tiny-llm/image")
        backend = regs.backend(repo)
        backend.upload_blob(repo.repository, blob)
        data = ManifestData(manifest, media.OCI_MANIFEST, sha256_digest(manifest))
        backend.put_manifest(repo.repository, data, tag=commit)
    return data.digest


def test_lineage_reaches_the_training_image_and_its_commit(local_project: Project) -> None:
    from trainops.registry.lineage_data import Lineage
    from trainops.registry.store import push

    setup(local_project, steps=())
    commit = "0123456789abcdef0123456789abcdef01234567"
    image = push_image(local_project, commit)
    src = local_project.root / "made" / "trained"
    src.mkdir(parents=True)
    shutil.copy(Path(__file__), src / "model.json")
    with local_project.registries() as regs:
        push(
            regs,
            source=src,
            ref=regs.ref("tiny-llm/checkpoints:step-7"),
            kind="checkpoint",
            lineage=Lineage(step=7, image_digest=image, git_commit=commit, metrics={"loss": 1.0}),
        )
    assert local_project.trainops("eval", "run", "step-7").code == 0
    result = released(local_project)
    graph = json.loads(local_project.trainops("lineage", result["ref"], "--format", "json").stdout)
    nodes = {n["digest"]: n for n in graph["nodes"]}
    edges = {(nodes[e["child"]]["kind"], e["relation"], nodes[e["parent"]]["kind"]) for e in graph["edges"]}
    assert ("model", "image", "image") in edges and ("model", "released-from", "checkpoint") in edges
    assert nodes[image]["gitCommit"] == commit


def test_a_release_never_downloads_the_checkpoint(local_project: Project) -> None:
    """Without release.export the release is assembled from the checkpoint's blobs in the
    registry: the excluded optimizer blob is never read (here it is gone)."""
    setup(local_project)
    assert local_project.trainops("eval", "run", "step-2").code == 0
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref("tiny-llm/checkpoints:step-2"))
    layers = {found.parsed.file_path(layer, i): layer for i, layer in enumerate(found.parsed.layers)}
    blobs = Path(found.ref.repository) / "blobs" / "sha256"
    (blobs / layers["optimizer.safetensors"].digest[7:]).unlink()
    result = released(local_project, "step-2")
    assert result["files"] == ["model.safetensors", "trainer_state.json"]
    assert result["model"]["paramSize"] == "2.1k"
    with local_project.registries() as regs:
        model = resolve(regs, ref=regs.ref(result["ref"]))
        pulled = pulling.pull(regs, ref=model.ref, dest=local_project.root / "pulled")
    assert sorted(pulled.files) == ["model.safetensors", "trainer_state.json"]
    assert (local_project.root / "pulled" / "model.safetensors").read_bytes() == (
        local_project.root / "made" / "step-2" / "model.safetensors"
    ).read_bytes()


def test_a_chunked_checkpoint_is_evaluated_and_released_as_one_layer_per_file(local_project: Project) -> None:
    setup(local_project, steps=())
    local_project.push_checkpoint(1, metrics={"loss": 1.0}, rows=16384, dedup="chunks")  # a 2 MiB weight file
    with local_project.registries() as regs:
        ckpt = resolve(regs, ref=regs.ref("tiny-llm/checkpoints:step-1"))
    assert media.CHUNK_INDEX in {layer.media_type for layer in ckpt.parsed.layers}  # it is chunked
    assert local_project.trainops("eval", "run", "step-1").code == 0  # eval pulls it: rebuilt from packs
    result = released(local_project, "step-1")
    assert result["files"] == ["model.safetensors", "trainer_state.json"]
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        types = {layer.media_type for layer in found.parsed.layers}
        assert types == {media.WEIGHT_RAW, media.WEIGHT_CONFIG_RAW}  # no packs, no indexes: plain ModelPack
        out = pulling.pull(regs, ref=found.ref, dest=local_project.root / "released")
    made = local_project.root / "made" / "step-1"
    assert (out.dest / "model.safetensors").read_bytes() == (made / "model.safetensors").read_bytes()
    # 16384×32 float32 + 8 float16, read from the rebuilt file's header
    assert model_config(local_project, result["ref"])["config"]["paramSize"] == "524.3k"


def test_a_model_modctl_made_is_released_and_served_with_its_file_names(local_project: Project) -> None:
    from tests.registry.modctl_layout import model_dir, push_modctl
    from trainops.rollout.resolve import resolve_release

    setup(local_project, steps=(), release={"tag": "imported", "requireGates": False})
    model = model_dir(local_project.root / "modctl-model")
    with local_project.registries() as regs:
        ref = regs.ref("tiny-llm/checkpoints:modctl")
        push_modctl(regs.backend(ref), ref.repository, "modctl", model)
        assert "@sha256:" in resolve_release(regs, str(ref))  # servable as it is: a model
    result = released(local_project, "modctl")
    assert result["version"] == "imported"
    with local_project.registries() as regs:
        found = resolve(regs, ref=regs.ref(result["ref"]))
        assert found.parsed.artifact_type == media.MODEL_ARTIFACT
        assert {layer.media_type for layer in found.parsed.layers} <= set(media.MODELPACK_LAYER_TYPES)  # raw
        out = pulling.pull(regs, ref=found.ref, dest=local_project.root / "released")
        assert resolve_release(regs, result["ref"]) == str(found.ref)
    assert "model.safetensors" in result["files"]
    for relpath in result["files"]:
        assert (out.dest / relpath).read_bytes() == (model / relpath).read_bytes(), relpath
    # 64×16 float32 + 16 float16, read from the unpacked file's header
    assert model_config(local_project, result["ref"])["config"]["paramSize"] == "1k"  # not modctl's "1.0k"
