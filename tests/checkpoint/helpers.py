"""Realistic checkpoint directories of each layout, small files, and polling helpers."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from trainops.checkpoint import WatchConfig, Watcher, WatchEvent
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.reference import Reference

T = TypeVar("T")
SMALL = 2048


def blob(size: int = SMALL) -> bytes:
    return os.urandom(size)


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)


def trainops_ckpt(directory: Path, step: int, *, metrics: dict[str, float] | None = None) -> Path:
    """As tiny-llm writes one: into a .tmp-* sibling, then renamed to step-NNNNNN."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step:06d}"
    tmp = directory / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _write(tmp / "model.safetensors", blob())
    _write(tmp / "optimizer.safetensors", blob())
    state = {"step": step, "metrics": metrics or {"train_loss": 3.0, "val_loss": 2.0 + 1 / (step + 1)}, "run_id": "x"}
    _write(tmp / "trainer_state.json", json.dumps(state))
    if final.exists():
        old = directory / f".tmp-old-{final.name}"
        os.rename(final, old)
        os.rename(tmp, final)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        os.rename(tmp, final)
    return final


def hf_state(step: int, eval_loss: float | None, best: float | None = None) -> str:
    history: list[dict[str, float]] = [{"loss": 2.5, "learning_rate": 1e-4, "epoch": 0.5, "step": step - 1}]
    if eval_loss is not None:
        history.append({"eval_loss": eval_loss, "eval_accuracy": 0.5, "eval_runtime": 1.5, "step": step})
    history.append({"loss": 2.4, "step": step})
    state: dict[str, object] = {"global_step": step, "log_history": history, "epoch": 1.0}
    if best is not None:
        state["best_metric"] = best
    return json.dumps(state)


HF_FILES = ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "config.json")


def hf_ckpt(
    directory: Path, step: int, *, eval_loss: float | None = 1.0, best: float | None = None, state: bool = True
) -> Path:
    """A Trainer checkpoint-N: weights, optimizer, scheduler, RNG, then trainer_state.json last."""
    path = directory / f"checkpoint-{step}"
    for name in HF_FILES:
        _write(path / name, blob() if name != "config.json" else '{"model_type": "llama"}')
    if state:
        _write(path / "trainer_state.json", hf_state(step, eval_loss, best))
    return path


def megatron_ckpt(directory: Path, iteration: int, *, tracker: bool = True, ranks: int = 2) -> Path:
    """iter_NNNNNNN/mp_rank_XX/model_optim_rng.pt per tensor-parallel rank, then the tracker."""
    path = directory / f"iter_{iteration:07d}"
    for rank in range(ranks):
        _write(path / f"mp_rank_{rank:02d}" / "model_optim_rng.pt", blob())
    if tracker:
        _write(directory / "latest_checkpointed_iteration.txt", str(iteration))
    return path


def deepspeed_ckpt(directory: Path, step: int, *, latest: bool = True, ranks: int = 2) -> Path:
    """global_stepN/ with the model states and one ZeRO optimizer shard per rank, then `latest`."""
    path = directory / f"global_step{step}"
    _write(path / "mp_rank_00_model_states.pt", blob())
    for rank in range(ranks):
        _write(path / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt", blob())
    if latest:
        _write(directory / "latest", f"global_step{step}")
    _write(directory / "zero_to_fp32.py", "# conversion script\n")
    return path


def watcher(
    registries: Registries,
    directory: Path,
    repository: Reference,
    *,
    run_id: str = "run-a",
    on_event: Callable[[WatchEvent], None] | None = None,
    progress: ProgressSink | None = None,
    **options: object,
) -> Watcher:
    config = WatchConfig(directory=directory, repository=repository, run_id=run_id, interval=0.05, settle=0.1)
    for key, value in options.items():
        assert hasattr(config, key), key
        setattr(config, key, value)
    return Watcher(registries, config, on_event=on_event, progress=progress)


def wait_for(condition: Callable[[], T | None], *, timeout: float = 30.0, what: str = "condition") -> T:
    """Poll condition until it returns something truthy, failing after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.02)
