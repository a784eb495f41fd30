"""Corpus loading, vocabulary, the deterministic train/val split and batching."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

# Text is split into blocks of this many characters; every block whose index is
# congruent to 0 modulo round(1 / val_fraction) goes to validation. This spreads the
# held-out text over the whole corpus instead of taking only its last story.
SPLIT_BLOCK = 512

_PACKAGE_DIR = Path(__file__).resolve().parent
_CORPUS_CANDIDATES = (
    _PACKAGE_DIR / "data" / "corpus.txt",  # installed wheel (force-included)
    _PACKAGE_DIR.parent / "data" / "corpus.txt",  # source checkout: examples/tiny-llm/data
)


def default_corpus_path() -> Path:
    for candidate in _CORPUS_CANDIDATES:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "shipped corpus not found (looked in "
        + ", ".join(str(c) for c in _CORPUS_CANDIDATES)
        + "); pass --data or set TINY_LLM_DATA"
    )


def resolve_corpus(path: str | None) -> Path:
    if path is None:
        return default_corpus_path()
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise FileNotFoundError(f"corpus file not found: {resolved}")
    return resolved


def read_corpus(path: Path) -> tuple[str, str]:
    """Return the text and the sha256 of its bytes."""
    raw = path.read_bytes()
    return raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()


def build_vocab(text: str) -> list[str]:
    return sorted(set(text))


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """Deterministically split ``text`` into (train, val) by interleaved blocks."""
    period = max(2, round(1.0 / val_fraction))
    blocks = [text[i : i + SPLIT_BLOCK] for i in range(0, len(text), SPLIT_BLOCK)]
    val = "".join(b for i, b in enumerate(blocks) if i % period == period // 2)
    train = "".join(b for i, b in enumerate(blocks) if i % period != period // 2)
    return train, val


def encode(text: str, vocab: list[str]) -> IntArray:
    index = {ch: i for i, ch in enumerate(vocab)}
    return np.fromiter((index[ch] for ch in text), dtype=np.int64, count=len(text))


def decode(ids: Any, vocab: list[str]) -> str:
    return "".join(vocab[int(i)] for i in ids)


def windows(ids: IntArray, context: int) -> tuple[IntArray, IntArray]:
    """All (context, next character) pairs: X has shape (N, context), Y shape (N,)."""
    if len(ids) <= context:
        raise ValueError(f"text of {len(ids)} characters is too short for context {context}")
    x = np.lib.stride_tricks.sliding_window_view(ids[:-1], context).copy()
    y = ids[context:].copy()
    return x, y


@dataclass
class Dataset:
    vocab: list[str]
    sha256: str
    train_x: IntArray
    train_y: IntArray
    val_x: IntArray
    val_y: IntArray


def load_dataset(
    path: Path, context: int, val_fraction: float, vocab: list[str] | None = None
) -> Dataset:
    """Load, split and window the corpus. ``vocab`` (from a checkpoint) is reused if given;
    characters outside it are dropped."""
    text, sha = read_corpus(path)
    if vocab is None:
        vocab = build_vocab(text)
    else:
        known = set(vocab)
        text = "".join(ch for ch in text if ch in known)
    train, val = split_text(text, val_fraction)
    train_x, train_y = windows(encode(train, vocab), context)
    val_x, val_y = windows(encode(val, vocab), context)
    return Dataset(vocab, sha, train_x, train_y, val_x, val_y)


class BatchSampler:
    """Shuffled passes over the training examples, resumable exactly.

    Each epoch draws a permutation from a PCG64 generator. The state saved is the
    generator's state *before* that draw plus the epoch number and the cursor into the
    permutation, so a restored sampler regenerates the same permutation and continues at
    the same position. A tail shorter than one batch is skipped.
    """

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        if n < batch_size:
            raise ValueError(f"{n} training examples is fewer than batch size {batch_size}")
        self.n = n
        self.batch_size = batch_size
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 1])))
        self.epoch = -1
        self.cursor = 0
        self._epoch_state: Mapping[str, Any] = {}
        self._perm: IntArray = np.empty(0, dtype=np.int64)
        self._new_epoch()

    def _new_epoch(self) -> None:
        self._epoch_state = self.rng.bit_generator.state
        self._perm = self.rng.permutation(self.n)
        self.epoch += 1
        self.cursor = 0

    def next(self) -> IntArray:
        if self.cursor + self.batch_size > self.n:
            self._new_epoch()
        batch = self._perm[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return batch

    def state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "cursor": self.cursor,
            "epoch_start_bit_generator": encode_bit_generator_state(self._epoch_state),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = decode_bit_generator_state(
            state["epoch_start_bit_generator"]
        )
        self._epoch_state = self.rng.bit_generator.state
        self._perm = self.rng.permutation(self.n)
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])


def encode_bit_generator_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """PCG64 state as JSON-safe values (its 128-bit integers become hex strings)."""
    if state.get("bit_generator") != "PCG64":
        raise ValueError(f"unsupported bit generator {state.get('bit_generator')!r}")
    return {
        "bit_generator": "PCG64",
        "state": {k: hex(int(v)) for k, v in state["state"].items()},
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def decode_bit_generator_state(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "bit_generator": state["bit_generator"],
        "state": {k: int(v, 16) for k, v in state["state"].items()},
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }
