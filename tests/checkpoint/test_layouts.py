"""Layouts on real directories: detection, steps, what counts as committed, and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.checkpoint.helpers import deepspeed_ckpt, hf_ckpt, megatron_ckpt, trainops_ckpt
from trainops.checkpoint import LAYOUT_NAMES
from trainops.checkpoint.layouts import LAYOUTS, detect_layout, get_layout
from trainops.checkpoint.metrics import read_metrics
from trainops.cli.ckpt_cmds import LAYOUTS as CLI_LAYOUTS
from trainops.errors import InputError


def _committed(layout: str, directory: Path) -> list[str]:
    return [f.name for f in get_layout(layout).listing(directory).found if f.committed]


def _all(layout: str, directory: Path) -> list[str]:
    return [f.name for f in get_layout(layout).listing(directory).found]


def test_cli_offers_every_layout() -> None:
    assert CLI_LAYOUTS == LAYOUT_NAMES


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: trainops_ckpt(d, 10), "trainops"),
        (lambda d: hf_ckpt(d, 10), "huggingface"),
        (lambda d: megatron_ckpt(d, 10), "megatron"),
        (lambda d: deepspeed_ckpt(d, 10), "deepspeed"),
    ],
)
def test_auto_detects_each_layout(tmp_path: Path, make: object, expected: str) -> None:
    make(tmp_path)  # type: ignore[operator]
    (tmp_path / ".trainops").mkdir()
    found = detect_layout(tmp_path)
    assert found is not None and found.name == expected


def test_auto_waits_on_an_empty_directory_and_refuses_a_mixed_one(tmp_path: Path) -> None:
    assert detect_layout(tmp_path) is None
    assert detect_layout(tmp_path / "missing") is None
    trainops_ckpt(tmp_path, 1)
    hf_ckpt(tmp_path, 2)
    with pytest.raises(InputError, match="more than one checkpoint layout"):
        detect_layout(tmp_path)


def test_hf_with_deepspeed_inside_is_huggingface(tmp_path: Path) -> None:
    ckpt = hf_ckpt(tmp_path, 50)
    deepspeed_ckpt(ckpt, 50)  # the Trainer under DeepSpeed nests global_stepN/ and latest
    found = detect_layout(tmp_path)
    assert found is not None and found.name == "huggingface"


def test_trainops_layout_ignores_temporary_dirs(tmp_path: Path) -> None:
    trainops_ckpt(tmp_path, 100)
    (tmp_path / ".tmp-step-000200-1-abcd").mkdir()
    (tmp_path / ".tmp-step-000200-1-abcd" / "model.safetensors").write_bytes(b"x")
    (tmp_path / "step-notanumber").mkdir()
    listing = get_layout("trainops").listing(tmp_path)
    assert [f.name for f in listing.found] == ["step-000100"]
    assert listing.found[0].step == 100 and listing.found[0].committed
    assert listing.writing


def test_hf_commits_when_trainer_state_is_whole(tmp_path: Path) -> None:
    hf_ckpt(tmp_path, 100)
    hf_ckpt(tmp_path, 200, state=False)
    torn = hf_ckpt(tmp_path, 300, state=False)
    (torn / "trainer_state.json").write_text('{"global_step": 300, "log_hi')
    hf_ckpt(tmp_path, 400).rename(tmp_path / "tmp-checkpoint-400")
    assert _all("huggingface", tmp_path) == ["checkpoint-100", "checkpoint-200", "checkpoint-300"]
    assert _committed("huggingface", tmp_path) == ["checkpoint-100"]
    assert all(f.needs_settle for f in get_layout("huggingface").listing(tmp_path).found)


def test_megatron_commits_up_to_the_tracker(tmp_path: Path) -> None:
    megatron_ckpt(tmp_path, 100)
    megatron_ckpt(tmp_path, 200)
    megatron_ckpt(tmp_path, 300, tracker=False)  # saved, tracker not yet updated
    assert _all("megatron", tmp_path) == ["iter_0000100", "iter_0000200", "iter_0000300"]
    assert _committed("megatron", tmp_path) == ["iter_0000100", "iter_0000200"]
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("")  # torn
    assert _committed("megatron", tmp_path) == []
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("release")
    (tmp_path / "release" / "mp_rank_00").mkdir(parents=True)
    (tmp_path / "release" / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"w")
    found = get_layout("megatron").listing(tmp_path).found
    assert [(f.name, f.step) for f in found if f.committed] == [("release", 0)]


def test_deepspeed_commits_up_to_latest(tmp_path: Path) -> None:
    deepspeed_ckpt(tmp_path, 10)
    deepspeed_ckpt(tmp_path, 20)
    deepspeed_ckpt(tmp_path, 30, latest=False)
    assert _committed("deepspeed", tmp_path) == ["global_step10", "global_step20"]
    (tmp_path / "latest").unlink()
    assert _committed("deepspeed", tmp_path) == []


def test_deepspeed_custom_tags_follow_latest(tmp_path: Path) -> None:
    for step in (5, 7):
        (tmp_path / f"ckpt{step}").mkdir()
        (tmp_path / f"ckpt{step}" / "mp_rank_00_model_states.pt").write_bytes(b"m")
    (tmp_path / "latest").write_text("ckpt5")
    assert _all("deepspeed", tmp_path) == ["ckpt5", "ckpt7"]
    assert _committed("deepspeed", tmp_path) == ["ckpt5"]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_default_names_parse_back(name: str) -> None:
    layout = get_layout(name)
    assert layout.step_of(layout.default_name(1234)) == 1234
    assert layout.step_of("nonsense") is None


def test_unknown_layout() -> None:
    with pytest.raises(InputError, match="unknown checkpoint layout 'keras'"):
        get_layout("keras")


def test_metrics_tiny_llm_hf_and_metrics_json(tmp_path: Path) -> None:
    tiny = trainops_ckpt(tmp_path / "a", 10, metrics={"train_loss": 3.5, "val_loss": 2.25})
    assert read_metrics(tiny) == {"train_loss": 3.5, "val_loss": 2.25}
    hf = hf_ckpt(tmp_path / "b", 20, eval_loss=1.5, best=1.25)
    assert read_metrics(hf) == {"eval_loss": 1.5, "eval_accuracy": 0.5, "eval_runtime": 1.5, "best_metric": 1.25}
    mega = megatron_ckpt(tmp_path / "c", 30)
    assert read_metrics(mega) == {}
    (mega / "metrics.json").write_text(
        json.dumps({"lm_loss": 2.0, "ok": True, "name": "x", "nan": float("nan"), "ppl": 7})
    )
    assert read_metrics(mega) == {"lm_loss": 2.0, "ppl": 7.0}
    (tiny / "metrics.json").write_text(json.dumps({"val_loss": 2.0}))
    assert read_metrics(tiny)["val_loss"] == 2.0  # metrics.json has the last word
    (hf / "trainer_state.json").write_text("not json")
    assert read_metrics(hf) == {}
