"""Configuration: defaults, environment variables and CLI flags (flags override env).

The trainops environment contract uses the ``TRAINOPS_*`` variables plus ``RANK`` and
``WORLD_SIZE``; every other knob has a ``TINY_LLM_*`` variable named after its flag
(``--hidden`` -> ``TINY_LLM_HIDDEN``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Option:
    """One configurable value: its CLI flag, environment variable and parser."""

    name: str
    env: str
    parse: Callable[[str], Any]
    help: str


# Hyperparameters that define the model and the training trajectory. On resume they are
# taken from the checkpoint, because changing any of them would break exact continuation.
TRAJECTORY_KEYS = (
    "data_sha256",
    "val_fraction",
    "context",
    "embed",
    "hidden",
    "batch_size",
    "lr",
    "warmup_steps",
    "lr_decay_steps",
    "min_lr_ratio",
    "weight_decay",
    "dropout",
    "grad_clip",
    "seed",
)


@dataclass
class TrainConfig:
    # data
    data: str | None = None  # path to a UTF-8 text file; None = the shipped corpus
    val_fraction: float = 0.1
    # model
    context: int = 8
    embed: int = 24
    hidden: int = 192
    dropout: float = 0.4
    # optimisation
    batch_size: int = 256
    lr: float = 5e-3
    warmup_steps: int = 100
    lr_decay_steps: int = 5000
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 1337
    # run control
    max_steps: int = 5000
    ckpt_every: int = 500
    log_every: int = 200
    progress_every: int = 20
    ckpt_dir: str = "./checkpoints"
    run_id: str | None = None
    rank: int = 0
    world_size: int = 1
    # filled in once the corpus has been read
    data_sha256: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be a non-negative integer, got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise ValueError(f"must be between 0 and 1, got {text!r}")
    return value


def _unit_interval(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"must be in [0, 1), got {text!r}")
    return value


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be in [0, 1], got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0.0:
        raise ValueError(f"must be >= 0, got {text!r}")
    return value


TRAIN_OPTIONS: tuple[Option, ...] = (
    Option("data", "TINY_LLM_DATA", str, "training text file (default: shipped corpus)"),
    Option("val_fraction", "TINY_LLM_VAL_FRACTION", _fraction, "share of text held out"),
    Option("context", "TINY_LLM_CONTEXT", _positive_int, "context window in characters"),
    Option("embed", "TINY_LLM_EMBED", _positive_int, "character embedding size"),
    Option("hidden", "TINY_LLM_HIDDEN", _positive_int, "hidden layer width"),
    Option("dropout", "TINY_LLM_DROPOUT", _unit_interval, "dropout rate on the hidden layer"),
    Option("batch_size", "TINY_LLM_BATCH_SIZE", _positive_int, "examples per step"),
    Option("lr", "TINY_LLM_LR", _non_negative_float, "peak Adam learning rate"),
    Option("warmup_steps", "TINY_LLM_WARMUP_STEPS", _non_negative_int, "linear LR warmup"),
    Option(
        "lr_decay_steps",
        "TINY_LLM_LR_DECAY_STEPS",
        _non_negative_int,
        "cosine LR decay ends here, independent of max_steps (0=no decay)",
    ),
    Option("min_lr_ratio", "TINY_LLM_MIN_LR_RATIO", _ratio, "final LR as a share of --lr"),
    Option("weight_decay", "TINY_LLM_WEIGHT_DECAY", _non_negative_float, "AdamW decay"),
    Option("grad_clip", "TINY_LLM_GRAD_CLIP", _non_negative_float, "global norm clip (0=off)"),
    Option("seed", "TINY_LLM_SEED", int, "random seed"),
    Option("max_steps", "TRAINOPS_MAX_STEPS", _non_negative_int, "train until this step"),
    Option("ckpt_every", "TRAINOPS_CKPT_EVERY", _positive_int, "steps between checkpoints"),
    Option("log_every", "TINY_LLM_LOG_EVERY", _positive_int, "steps between JSON log lines"),
    Option(
        "progress_every", "TINY_LLM_PROGRESS_EVERY", _non_negative_int,
        "steps between per-rank progress lines with WORLD_SIZE > 1 (0=off)",
    ),
    Option("ckpt_dir", "TRAINOPS_CKPT_DIR", str, "checkpoint directory"),
    Option("run_id", "TRAINOPS_RUN_ID", str, "run id recorded in checkpoints"),
    Option("rank", "RANK", _non_negative_int, "process rank (only rank 0 writes)"),
    Option("world_size", "WORLD_SIZE", _positive_int, "number of processes"),
)


class ConfigError(ValueError):
    """A value from the environment or the command line is invalid."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_values(options: Sequence[Option], environ: Mapping[str, str]) -> dict[str, Any]:
    """Parse the options that are set (and non-empty) in ``environ``."""
    values: dict[str, Any] = {}
    for opt in options:
        raw = environ.get(opt.env)
        if raw is None or raw.strip() == "":
            continue
        try:
            values[opt.name] = opt.parse(raw.strip())
        except ValueError as exc:
            raise ConfigError(f"invalid {opt.env}={raw!r}: {exc}") from exc
    return values


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    for opt in options:

        def parse(text: str, _opt: Option = opt) -> Any:
            try:
                return _opt.parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from exc

        parse.__name__ = opt.name  # shown by argparse in error messages
        parser.add_argument(
            _flag(opt.name),
            dest=opt.name,
            type=parse,
            default=None,
            metavar=opt.name.upper(),
            help=f"{opt.help} [env {opt.env}]",
        )


def train_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> TrainConfig:
    """Build the training config from defaults, then ``environ``, then ``argv``."""
    parser = argparse.ArgumentParser(
        prog="python -m tiny_llm.train",
        description="Train a tiny character-level MLP language model with numpy.",
    )
    add_options(parser, TRAIN_OPTIONS)
    args = parser.parse_args(argv)
    values = env_values(TRAIN_OPTIONS, os.environ if environ is None else environ)
    values.update({k: v for k, v in vars(args).items() if v is not None})
    cfg = TrainConfig(**values)
    if cfg.rank >= cfg.world_size:
        raise ConfigError(f"RANK={cfg.rank} must be smaller than WORLD_SIZE={cfg.world_size}")
    return cfg
