"""Train the tiny character model: ``python -m tiny_llm.train [flags]``.

Resumes from the newest complete checkpoint in ``$TRAINOPS_CKPT_DIR``, writes a checkpoint
every ``$TRAINOPS_CKPT_EVERY`` steps and at the last step, and prints one JSON object per
log interval (plus a final one) on stdout. SIGTERM/SIGINT stop after the current step and
write a checkpoint first, then exit with 128 + the signal number.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from . import __version__
from ._cli import emit, fail, log, setup_logging
from .checkpoint import (
    Checkpoint,
    checkpoint_name,
    load_latest,
    remove_stale_temp_dirs,
    save_checkpoint,
)
from .config import TRAJECTORY_KEYS, ConfigError, TrainConfig, train_config
from .data import (
    BatchSampler,
    Dataset,
    decode_bit_generator_state,
    encode_bit_generator_state,
    load_dataset,
    resolve_corpus,
)
from .model import (
    AdamW,
    ModelShape,
    Params,
    clip_grads,
    dropout_mask,
    init_params,
    loss,
    loss_and_grads,
    lr_at,
)


class _StopFlag:
    """Set by SIGTERM/SIGINT; the loop checks it between steps."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            log.warning("received %s, stopping after the current step", signal.strsignal(signum))
        self.signum = signum


def _adopt_checkpoint_config(cfg: TrainConfig, ckpt: Checkpoint) -> TrainConfig:
    """Keep run-control settings from ``cfg`` but the trajectory from the checkpoint."""
    saved: dict[str, Any] = ckpt.state["config"]
    missing = [key for key in TRAJECTORY_KEYS if key not in saved]
    if missing:
        raise ValueError(f"{ckpt.name} was not written by this trainer (no {', '.join(missing)})")
    for key in TRAJECTORY_KEYS:
        ours = getattr(cfg, key)
        if key != "data_sha256" and ours != saved[key]:
            log.warning(
                "ignoring %s=%r: resuming %s, which was trained with %s=%r",
                key,
                ours,
                ckpt.name,
                key,
                saved[key],
            )
    data = cfg.data if cfg.data is not None else saved.get("data")
    return dataclasses.replace(cfg, data=data, **{k: saved[k] for k in TRAJECTORY_KEYS})


def _model_metadata(dataset: Dataset, cfg: TrainConfig, step: int) -> dict[str, str]:
    return {
        "vocab": json.dumps(dataset.vocab),
        "vocab_size": str(len(dataset.vocab)),
        "context": str(cfg.context),
        "embed": str(cfg.embed),
        "hidden": str(cfg.hidden),
        "step": str(step),
        "tiny_llm_version": __version__,
    }


def run(cfg: TrainConfig) -> int:
    started = time.perf_counter()
    ckpt_dir = Path(cfg.ckpt_dir)
    writer = cfg.rank == 0
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if cfg.world_size > 1:
        log.warning(
            "WORLD_SIZE=%d: this example has no gradient all-reduce; every rank trains the "
            "same replica and only rank 0 writes checkpoints",
            cfg.world_size,
        )
    if writer:
        for name in remove_stale_temp_dirs(ckpt_dir):
            log.info("removed stale temporary directory %s", name)

    ckpt = load_latest(ckpt_dir)
    resumed_from: str | None = None
    if ckpt is not None:
        resumed_from = ckpt.name
        cfg = _adopt_checkpoint_config(cfg, ckpt)
        log.info("resuming from checkpoint %s (step %d)", ckpt.path, ckpt.step)
    else:
        log.info("no checkpoint in %s, starting from scratch", ckpt_dir)

    corpus = resolve_corpus(cfg.data)
    dataset = load_dataset(
        corpus, cfg.context, cfg.val_fraction, vocab=ckpt.vocab if ckpt else None
    )
    if ckpt is not None and dataset.sha256 != cfg.data_sha256:
        return fail(
            f"corpus {corpus} (sha256 {dataset.sha256[:12]}) differs from the one "
            f"{ckpt.name} was trained on (sha256 {str(cfg.data_sha256)[:12]}); "
            "cannot resume exactly"
        )
    cfg = dataclasses.replace(cfg, data_sha256=dataset.sha256)
    log.info(
        "corpus %s: %d train / %d val examples, vocab %d; config %s",
        corpus,
        len(dataset.train_y),
        len(dataset.val_y),
        len(dataset.vocab),
        json.dumps(cfg.to_dict(), sort_keys=True),
    )

    shape = ModelShape(len(dataset.vocab), cfg.context, cfg.embed, cfg.hidden)
    params: Params = init_params(shape, cfg.seed)
    optimizer = AdamW(params, weight_decay=cfg.weight_decay)
    sampler = BatchSampler(len(dataset.train_y), cfg.batch_size, cfg.seed)
    dropout_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([cfg.seed, 2])))
    step = 0
    last_metrics: dict[str, float | None] = {"train_loss": None, "val_loss": None}
    if ckpt is not None:
        params = ckpt.params
        optimizer.load_state_tensors(ckpt.optimizer, t=ckpt.step)
        sampler.restore(ckpt.state["rng"]["data_sampler"])
        dropout_rng.bit_generator.state = decode_bit_generator_state(ckpt.state["rng"]["dropout"])
        step = ckpt.step
        last_metrics = dict(ckpt.state.get("metrics", last_metrics))

    stop = _StopFlag()
    previous_handlers = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    log_losses: list[float] = []
    ckpt_losses: list[float] = []
    interval = (time.perf_counter(), 0)  # (start, input tokens) of the log interval
    last_saved: str | None = ckpt.name if ckpt else None
    val_cache: tuple[int, float] | None = None

    def val_loss_now() -> float:
        nonlocal val_cache
        if val_cache is None or val_cache[0] != step:
            val_cache = (step, loss(params, dataset.val_x, dataset.val_y))
        return val_cache[1]

    def write_checkpoint() -> None:
        nonlocal last_saved, ckpt_losses
        train_loss = float(np.mean(ckpt_losses)) if ckpt_losses else last_metrics["train_loss"]
        metrics = {"train_loss": train_loss, "val_loss": val_loss_now()}
        last_metrics.update(metrics)
        ckpt_losses = []
        if not writer:
            return
        state = {
            "step": step,
            "metrics": metrics,
            "run_id": cfg.run_id,
            "resumed_from": resumed_from,
            "config": cfg.to_dict(),
            "rng": {
                "data_sampler": sampler.state(),
                "dropout": encode_bit_generator_state(dropout_rng.bit_generator.state),
            },
        }
        path = save_checkpoint(
            ckpt_dir,
            step,
            params,
            optimizer.state_tensors(),
            state,
            _model_metadata(dataset, cfg, step),
        )
        last_saved = path.name
        log.info("saved checkpoint %s (val_loss %.4f)", path, metrics["val_loss"])

    try:
        if step >= cfg.max_steps:
            log.info("already at step %d >= max_steps %d, nothing to do", step, cfg.max_steps)
        while step < cfg.max_steps and stop.signum is None:
            idx = sampler.next()
            mask = dropout_mask(dropout_rng, len(idx), cfg.hidden, cfg.dropout)
            batch_loss, grads = loss_and_grads(
                params, dataset.train_x[idx], dataset.train_y[idx], mask
            )
            if not np.isfinite(batch_loss):
                return fail(f"non-finite training loss at step {step + 1}; not checkpointing")
            clip_grads(grads, cfg.grad_clip)
            lr = lr_at(step, cfg.lr, cfg.warmup_steps, cfg.lr_decay_steps, cfg.min_lr_ratio)
            optimizer.step(params, grads, lr)
            step += 1
            interval = (interval[0], interval[1] + len(idx) * cfg.context)
            log_losses.append(batch_loss)
            ckpt_losses.append(batch_loss)
            last = step == cfg.max_steps
            if cfg.world_size > 1 and cfg.progress_every and step % cfg.progress_every == 0:
                # every rank's progress, for the supervisor's straggler detector
                emit({"rank": cfg.rank, "step": step, "node": node})
            if step % cfg.log_every == 0 or last:
                train_loss = float(np.mean(log_losses))
                last_metrics["train_loss"] = train_loss
                log_losses = []
                now = time.perf_counter()
                tokens_per_second = interval[1] / max(now - interval[0], 1e-9)
                emit({"step": step, "train_loss": train_loss, "val_loss": val_loss_now(),
                      "tokens_per_second": round(tokens_per_second, 1)})  # fmt: skip
                interval = (time.perf_counter(), 0)
            if step % cfg.ckpt_every == 0 or last:
                write_checkpoint()
        if stop.signum is not None and last_saved != checkpoint_name(step) and step > 0:
            write_checkpoint()
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)

    elapsed = time.perf_counter() - started
    final = {
        "step": step,
        "train_loss": last_metrics.get("train_loss"),
        "val_loss": last_metrics.get("val_loss"),
        "final": True,
        "checkpoint": last_saved if writer else None,
        "resumed_from": resumed_from,
        "elapsed_s": round(elapsed, 3),
    }
    if cfg.world_size > 1:  # a rank done: the supervisor's straggler detector stops comparing it
        final["rank"] = cfg.rank
    emit(final)
    log.info("done at step %d in %.2fs", step, elapsed)
    if stop.signum is not None:
        return 128 + stop.signum
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    setup_logging()
    try:
        cfg = train_config(argv)
        return run(cfg)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        return fail(str(exc), code=2 if isinstance(exc, ConfigError) else 1)


if __name__ == "__main__":
    sys.exit(main())
