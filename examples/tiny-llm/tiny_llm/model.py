"""A Bengio-style character MLP with hand-written backprop, AdamW and gradient clipping.

    x (B, T) ids -> embed (B, T, E) -> flatten (B, T*E) -> fc1 + tanh (B, H)
                 -> head (B, V) logits -> softmax cross-entropy

All arithmetic is float32; given the same inputs every operation is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
Params = dict[str, Array]

PARAM_NAMES = ("embed.weight", "fc1.weight", "fc1.bias", "head.weight", "head.bias")
# Parameters that receive decoupled weight decay (not biases, not embeddings).
DECAYED = frozenset({"fc1.weight", "head.weight"})


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    context: int
    embed: int
    hidden: int


def init_params(shape: ModelShape, seed: int) -> Params:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0])))
    fan_in = shape.context * shape.embed
    tanh_gain = 5.0 / 3.0

    def normal(*dims: int, std: float) -> Array:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    return {
        "embed.weight": normal(shape.vocab_size, shape.embed, std=1.0),
        "fc1.weight": normal(fan_in, shape.hidden, std=tanh_gain / math.sqrt(fan_in)),
        "fc1.bias": np.zeros(shape.hidden, dtype=np.float32),
        # A small output layer makes the initial prediction close to uniform.
        "head.weight": normal(shape.hidden, shape.vocab_size, std=0.1 / math.sqrt(shape.hidden)),
        "head.bias": np.zeros(shape.vocab_size, dtype=np.float32),
    }


def shape_of(params: Params) -> ModelShape:
    vocab_size, embed = params["embed.weight"].shape
    fan_in, hidden = params["fc1.weight"].shape
    return ModelShape(vocab_size, fan_in // embed, embed, hidden)


def logits(params: Params, x: IntArray) -> Array:
    emb = params["embed.weight"][x].reshape(x.shape[0], -1)
    h = np.tanh(emb @ params["fc1.weight"] + params["fc1.bias"])
    out: Array = h @ params["head.weight"] + params["head.bias"]
    return out


def _log_softmax(z: Array) -> Array:
    z = z - z.max(axis=1, keepdims=True)
    out: Array = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return out


def loss(params: Params, x: IntArray, y: IntArray, chunk: int = 4096) -> float:
    """Mean cross-entropy in nats over all examples (evaluated in chunks)."""
    total = 0.0
    for start in range(0, len(x), chunk):
        logp = _log_softmax(logits(params, x[start : start + chunk]))
        yy = y[start : start + chunk]
        total += float(-logp[np.arange(len(yy)), yy].astype(np.float64).sum())
    return total / len(x)


def dropout_mask(rng: np.random.Generator, batch: int, hidden: int, rate: float) -> Array | None:
    """Inverted-dropout mask for the hidden layer (``None`` when ``rate`` is 0)."""
    if rate <= 0:
        return None
    keep = rng.random((batch, hidden), dtype=np.float32) >= rate
    mask: Array = keep.astype(np.float32) / np.float32(1.0 - rate)
    return mask


def loss_and_grads(
    params: Params, x: IntArray, y: IntArray, mask: Array | None = None
) -> tuple[float, Params]:
    """Batch loss and gradients; ``mask`` (from :func:`dropout_mask`) scales the hidden
    activations during training."""
    batch = x.shape[0]
    emb = params["embed.weight"][x].reshape(batch, -1)
    h = np.tanh(emb @ params["fc1.weight"] + params["fc1.bias"])
    hd = h if mask is None else h * mask
    z = hd @ params["head.weight"] + params["head.bias"]
    logp = _log_softmax(z)
    rows = np.arange(batch)
    value = float(-logp[rows, y].astype(np.float64).mean())

    dz = np.exp(logp)
    dz[rows, y] -= 1.0
    dz /= batch
    grads: Params = {
        "head.weight": hd.T @ dz,
        "head.bias": dz.sum(axis=0),
    }
    dh = dz @ params["head.weight"].T
    if mask is not None:
        dh *= mask
    dpre = dh * (1.0 - h * h)
    grads["fc1.weight"] = emb.T @ dpre
    grads["fc1.bias"] = dpre.sum(axis=0)
    demb = (dpre @ params["fc1.weight"].T).reshape(-1, params["embed.weight"].shape[1])
    dembed = np.zeros_like(params["embed.weight"])
    np.add.at(dembed, x.reshape(-1), demb)  # unbuffered and sequential: deterministic
    grads["embed.weight"] = dembed
    return value, grads


def clip_grads(grads: Params, max_norm: float) -> float:
    """Scale ``grads`` in place so their global L2 norm is at most ``max_norm``.
    Returns the norm before clipping. ``max_norm <= 0`` disables clipping."""
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
    if max_norm > 0 and norm > max_norm:
        scale = np.float32(max_norm / (norm + 1e-6))
        for g in grads.values():
            g *= scale
    return norm


class AdamW:
    """Adam with bias correction and decoupled weight decay; state is two moment tensors
    per parameter plus the step count."""

    def __init__(
        self,
        params: Params,
        beta1: float = 0.9,
        beta2: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps
        self.weight_decay = weight_decay
        self.t = 0
        self.m: Params = {k: np.zeros_like(v) for k, v in params.items()}
        self.v: Params = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params: Params, grads: Params, lr: float) -> None:
        self.t += 1
        c1 = 1.0 - self.beta1**self.t
        c2 = 1.0 - self.beta2**self.t
        for name, p in params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * (g * g)
            if self.weight_decay > 0 and name in DECAYED:
                p *= 1.0 - lr * self.weight_decay
            p -= (lr / c1) * m / (np.sqrt(v / c2) + self.eps)

    def state_tensors(self) -> dict[str, Array]:
        out: dict[str, Array] = {}
        for name in self.m:
            out[f"exp_avg.{name}"] = self.m[name]
            out[f"exp_avg_sq.{name}"] = self.v[name]
        return out

    def load_state_tensors(self, tensors: dict[str, Array], t: int) -> None:
        for name in self.m:
            self.m[name] = np.ascontiguousarray(tensors[f"exp_avg.{name}"], dtype=np.float32)
            self.v[name] = np.ascontiguousarray(tensors[f"exp_avg_sq.{name}"], dtype=np.float32)
        self.t = t


def lr_at(step: int, peak: float, warmup_steps: int, decay_steps: int, min_ratio: float) -> float:
    """Learning rate for update number ``step`` (0-based): linear warmup to ``peak``, cosine
    decay to ``peak * min_ratio`` at ``decay_steps``, then constant (``decay_steps <= 0``
    disables the decay). Deliberately independent of max_steps, so a run stopped at K and
    resumed to N follows the same schedule as a run straight to N."""
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if decay_steps <= warmup_steps:
        return peak
    progress = min(1.0, (step - warmup_steps) / (decay_steps - warmup_steps))
    return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def sample(
    params: Params,
    prompt_ids: list[int],
    length: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
    pad_id: int = 0,
) -> list[int]:
    """Generate ``length`` ids after ``prompt_ids`` (left-padded with ``pad_id``)."""
    context = shape_of(params).context
    ids = list(prompt_ids)
    out: list[int] = []
    for _ in range(length):
        window = ([pad_id] * context + ids)[-context:]
        z = logits(params, np.asarray([window], dtype=np.int64))[0].astype(np.float64)
        if temperature <= 0:
            nxt = int(np.argmax(z))
        else:
            z = z / temperature
            p = np.exp(z - z.max())
            nxt = int(rng.choice(len(p), p=p / p.sum()))
        ids.append(nxt)
        out.append(nxt)
    return out
