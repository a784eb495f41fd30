"""Restore the latest checkpoint for training to resume, and tiny-llm resuming from it."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoint.helpers import deepspeed_ckpt, hf_ckpt, megatron_ckpt, trainops_ckpt, watcher
from tests.registry.conftest import Target
from trainops.checkpoint import list_checkpoints, restore_latest, restore_ref
from trainops.checkpoint.layouts import get_layout
from trainops.errors import InputError
from trainops.registry import store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference

TINY = ["--context", "6", "--embed", "8", "--hidden", "48", "--batch-size", "32"]


@pytest.fixture
def local(tmp_path: Path) -> tuple[Registries, Reference]:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    return registries, registries.ref("team/ckpt")


def _same_tree(a: Path, b: Path) -> bool:
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    theirs = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    return files == theirs and not mismatch and not errors


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith(".trainops"))


def test_empty_or_missing_repository_is_not_an_error(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    result = restore_latest(registries, repository=repo, directory=tmp_path / "ckpt")
    assert (result.restored, result.path) == (None, None)
    assert result.reason == f"no checkpoint in {repo.repo_url}"
    with pytest.raises(InputError, match="names a tag"):
        restore_latest(registries, repository=repo.with_tag("x"), directory=tmp_path / "ckpt")


@pytest.mark.parametrize("target", ["file", "oci"], indirect=True)
def test_restore_latest_into_an_empty_directory(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    repo = registries.ref("team/ckpt")
    src = tmp_path / "train"
    trainops_ckpt(src, 100)
    latest = trainops_ckpt(src, 200)
    watcher(registries, src, repo).scan()
    dest = tmp_path / "resume"
    result = restore_latest(registries, repository=repo, directory=dest)
    assert result.restored is not None and result.restored.step == 200
    assert result.path == dest / "step-000200"
    assert result.reason == f"restored step-000200 (step 200) from {repo.repo_url}:step-200"
    assert _visible(dest) == ["step-000200"]  # nothing half-moved, no staging left beside it
    assert _same_tree(latest, dest / "step-000200")
    marker = json.loads((dest / ".trainops" / "restored.json").read_text())
    assert (marker["name"], marker["step"], marker["digest"]) == ("step-000200", 200, result.restored.digest)
    assert not (dest / ".trainops" / "restore").exists()


def test_directory_already_as_new_is_left_alone(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    trainops_ckpt(tmp_path / "train", 100)
    watcher(registries, tmp_path / "train", repo).scan()
    dest = tmp_path / "resume"
    trainops_ckpt(dest, 150)  # training got further before the pod restarted
    result = restore_latest(registries, repository=repo, directory=dest)
    assert result.restored is None and result.path == dest / "step-000150"
    assert "at least as new" in result.reason and "nothing pulled" in result.reason
    assert _visible(dest) == ["step-000150"]
    assert restore_latest(registries, repository=repo, directory=dest).restored is None


def test_megatron_restore_writes_the_tracker(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    src = tmp_path / "train"
    megatron_ckpt(src, 100)
    megatron_ckpt(src, 200)
    watcher(registries, src, repo).scan()
    dest = tmp_path / "resume"
    megatron_ckpt(dest, 50)
    megatron_ckpt(dest, 200, tracker=False)  # a leftover the previous run never committed
    (dest / "iter_0000200" / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"torn")
    (dest / "iter_0000200" / "mp_rank_07").mkdir()
    result = restore_latest(registries, repository=repo, directory=dest)
    assert result.restored is not None and result.path == dest / "iter_0000200"
    assert (dest / "latest_checkpointed_iteration.txt").read_text() == "200"
    assert _same_tree(src / "iter_0000200", dest / "iter_0000200")  # the leftover was replaced, not merged
    assert [f.name for f in get_layout("megatron").listing(dest).found if f.committed] == [
        "iter_0000050",
        "iter_0000200",
    ]
    again = restore_latest(registries, repository=repo, directory=dest)
    assert again.restored is None and again.path == dest / "iter_0000200"


def test_deepspeed_and_hf_restore(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, _ = local
    ds, hf = registries.ref("team/ds"), registries.ref("team/hf")
    deepspeed_ckpt(tmp_path / "ds", 30)
    watcher(registries, tmp_path / "ds", ds).scan()
    hf_ckpt(tmp_path / "hf", 40)
    watcher(registries, tmp_path / "hf", hf).scan()
    result = restore_latest(registries, repository=ds, directory=tmp_path / "ds-resume")
    assert result.path == tmp_path / "ds-resume" / "global_step30"
    assert (tmp_path / "ds-resume" / "latest").read_text() == "global_step30"
    result = restore_latest(registries, repository=hf, directory=tmp_path / "hf-resume")
    assert result.path == tmp_path / "hf-resume" / "checkpoint-40"
    assert _same_tree(tmp_path / "hf" / "checkpoint-40", tmp_path / "hf-resume" / "checkpoint-40")


def test_restore_a_given_reference_and_layout_mismatch(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    trainops_ckpt(tmp_path / "train", 1)
    trainops_ckpt(tmp_path / "train", 2)
    watcher(registries, tmp_path / "train", repo).scan()
    result = restore_ref(registries, ref=repo.with_tag("step-1"), directory=tmp_path / "a")
    assert result.restored is not None and result.restored.step == 1
    megatron_ckpt(tmp_path / "b", 1)
    with pytest.raises(InputError, match=r"is a trainops checkpoint but .* holds megatron ones"):
        restore_ref(registries, ref=repo.with_tag("step-2"), directory=tmp_path / "b")


def test_hostile_name_annotation_is_not_followed(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    src = trainops_ckpt(tmp_path / "train", 7)
    store.push(
        registries,
        source=src,
        ref=repo.with_tag("step-7"),
        kind="checkpoint",
        lineage=Lineage(step=7),
        annotations={"dev.trainops.checkpoint.name": "../../escaped", "dev.trainops.checkpoint.layout": "trainops"},
    )
    result = restore_latest(registries, repository=repo, directory=tmp_path / "resume")
    assert result.path == tmp_path / "resume" / "step-000007"
    assert not (tmp_path / "escaped").exists()


def _train(ckpt_dir: Path, max_steps: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "TINY_LLM_"))}
    env.update(TRAINOPS_CKPT_DIR=str(ckpt_dir), TRAINOPS_MAX_STEPS=str(max_steps), TRAINOPS_CKPT_EVERY="10")
    env.update(TRAINOPS_RUN_ID="tiny", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "tiny_llm.train", *TINY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    final: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return final


def test_tiny_llm_resumes_from_a_restored_checkpoint(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    first = tmp_path / "node-a"
    assert _train(first, 20)["checkpoint"] == "step-000020"
    pushed = watcher(registries, first, repo, run_id="run-1").scan()
    assert [p.step for p in pushed] == [10, 20]
    second = tmp_path / "node-b"  # a new pod on another node: an empty volume
    restored = restore_latest(registries, repository=repo, directory=second)
    assert restored.path == second / "step-000020"
    final = _train(second, 30)
    assert (final["step"], final["resumed_from"], final["checkpoint"]) == (30, "step-000020", "step-000030")
    w = watcher(registries, second, repo, run_id="run-2")
    [new] = w.scan()
    assert new.step == 30
    assert new.parent is not None
    assert (new.parent.digest, new.parent.relation) == (pushed[1].digest, "resumed-from")
    infos = {i.tag: i for i in list_checkpoints(registries, repository=repo)}
    assert infos["step-20"].run_id == "run-1" and infos["step-30"].run_id == "run-2"
    assert set(infos["step-30"].metrics) == {"train_loss", "val_loss"}


def test_interrupted_restore_leftovers_are_cleaned(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    trainops_ckpt(tmp_path / "train", 3)
    watcher(registries, tmp_path / "train", repo).scan()
    dest = tmp_path / "resume"
    stale = dest / ".trainops" / "restore" / "0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"from an older restore")
    result = restore_latest(registries, repository=repo, directory=dest)
    assert result.path == dest / "step-000003"
    assert not (dest / ".trainops" / "restore").exists()
    assert _visible(dest) == ["step-000003"]
