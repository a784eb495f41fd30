"""Evaluate a checkpoint: ``python -m tiny_llm.eval [--checkpoint DIR]``.

Prints exactly one JSON object on stdout::

    {"step": ..., "val_loss": ..., "perplexity": ..., "bits_per_char": ..., "sample": "..."}

``val_loss`` is the mean cross-entropy in nats per character on the validation split of
the corpus the checkpoint was trained on. ``sample`` is the prompt followed by generated
text. Without ``--checkpoint`` (or ``$TRAINOPS_EVAL_CHECKPOINT``, ``$TRAINOPS_CHECKPOINT``) the
newest checkpoint in ``$TRAINOPS_CKPT_DIR`` is used; if there is none, exits 1 with one line
on stderr.

Under ``trainops eval run`` (the contract: ``$TRAINOPS_EVAL_CHECKPOINT`` is the checkpoint's
directory, ``$TRAINOPS_EVAL_OUTPUT`` where the metrics go) the numeric values — ``step``,
``val_loss``, ``perplexity``, ``bits_per_char`` — are also written to ``$TRAINOPS_EVAL_OUTPUT``
as one JSON object (``--output`` does the same by hand).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._cli import emit, fail, log, setup_logging
from .checkpoint import Checkpoint, list_checkpoints, load_checkpoint, load_latest
from .config import ConfigError, Option, add_options, env_values
from .data import decode, load_dataset, resolve_corpus
from .model import loss, sample

EVAL_OPTIONS: tuple[Option, ...] = (
    Option("checkpoint", "TRAINOPS_CHECKPOINT", str, "checkpoint dir (default: newest)"),
    Option("output", "TRAINOPS_EVAL_OUTPUT", str, "also write the numeric metrics to this JSON file"),
    Option("ckpt_dir", "TRAINOPS_CKPT_DIR", str, "where to look for the newest checkpoint"),
    Option("data", "TINY_LLM_DATA", str, "corpus (default: the one used for training)"),
    Option("prompt", "TINY_LLM_PROMPT", str, "text the sample starts from"),
    Option("sample_len", "TINY_LLM_SAMPLE_LEN", int, "characters to generate"),
    Option("temperature", "TINY_LLM_TEMPERATURE", float, "sampling temperature (0=greedy)"),
    Option("seed", "TINY_LLM_SAMPLE_SEED", int, "sampling seed"),
)
DEFAULTS = {
    "checkpoint": None,
    "output": None,
    "ckpt_dir": "./checkpoints",
    "data": None,
    "prompt": "The ",
    "sample_len": 80,
    "temperature": 0.8,
    "seed": 0,
}


def _find_checkpoint(checkpoint: str | None, ckpt_dir: str) -> Checkpoint | str:
    """The checkpoint to evaluate, or an error message."""
    if checkpoint is not None:
        path = Path(checkpoint)
        if not path.is_dir():
            return f"checkpoint {path} does not exist"
        if list_checkpoints(path):  # a checkpoint root was given: take its newest
            found = load_latest(path)
            return found if found is not None else f"no loadable checkpoint in {path}"
        try:
            return load_checkpoint(path)
        except (OSError, ValueError, KeyError) as exc:
            return f"cannot load checkpoint {path}: {exc}"
    found = load_latest(Path(ckpt_dir))
    if found is None:
        return f"no checkpoint found in {ckpt_dir} (set TRAINOPS_CKPT_DIR or pass --checkpoint)"
    return found


def main(argv: Sequence[str] | None = None) -> int:
    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m tiny_llm.eval", description="Evaluate a tiny_llm checkpoint."
    )
    add_options(parser, EVAL_OPTIONS)
    args = parser.parse_args(argv)
    try:
        opts = {**DEFAULTS, **env_values(EVAL_OPTIONS, os.environ)}
    except ConfigError as exc:
        return fail(str(exc), code=2)
    opts.update({k: v for k, v in vars(args).items() if v is not None})
    if opts["checkpoint"] is None and os.environ.get("TRAINOPS_EVAL_CHECKPOINT"):
        opts["checkpoint"] = os.environ["TRAINOPS_EVAL_CHECKPOINT"]

    found = _find_checkpoint(opts["checkpoint"], opts["ckpt_dir"])
    if isinstance(found, str):
        return fail(found)
    ckpt = found
    saved = ckpt.state["config"]
    try:
        corpus = resolve_corpus(opts["data"] if opts["data"] is not None else saved.get("data"))
        dataset = load_dataset(corpus, int(saved["context"]), saved["val_fraction"], ckpt.vocab)
    except (OSError, ValueError) as exc:
        return fail(f"cannot load evaluation data: {exc}")
    if dataset.sha256 != saved.get("data_sha256"):
        log.warning("corpus %s is not the one %s was trained on", corpus, ckpt.name)
    log.info("evaluating %s on %d validation characters", ckpt.path, len(dataset.val_y))

    val_loss = loss(ckpt.params, dataset.val_x, dataset.val_y)
    index = {ch: i for i, ch in enumerate(ckpt.vocab)}
    prompt = "".join(ch for ch in opts["prompt"] if ch in index)
    pad_id = index.get(" ", 0)
    generated = sample(
        ckpt.params,
        [index[ch] for ch in prompt],
        max(0, int(opts["sample_len"])),
        np.random.default_rng(int(opts["seed"])),
        temperature=float(opts["temperature"]),
        pad_id=pad_id,
    )
    metrics = {
        "step": ckpt.step,
        "val_loss": val_loss,
        "perplexity": math.exp(val_loss),
        "bits_per_char": val_loss / math.log(2),
    }
    if opts["output"]:
        try:
            Path(opts["output"]).write_text(json.dumps(metrics) + "\n", encoding="utf-8")
        except OSError as exc:
            return fail(f"cannot write metrics to {opts['output']}: {exc}")
    emit({**metrics, "sample": prompt + decode(generated, ckpt.vocab)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
