"""Metrics of a checkpoint directory: its trainer_state.json (trainops' tiny-llm or the
Hugging Face Trainer) and, for any layout, a metrics.json beside the weights."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

STATE_FILE = "trainer_state.json"
METRICS_FILE = "metrics.json"
MAX_JSON_BYTES = 64 * 1024 * 1024  # a Trainer's log_history grows; beyond this, skip it


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None if it is missing, too large, torn or not an object."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def numbers(values: dict[str, Any], *, prefix: str | None = None) -> dict[str, float]:
    """The finite numeric entries of a mapping (booleans are not metrics)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        if prefix is not None and not str(key).startswith(prefix):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out[str(key)] = float(value)
    return out


def state_metrics(state: dict[str, Any]) -> dict[str, float]:
    """tiny-llm: the `metrics` object. Hugging Face: the last log_history entry that holds
    eval_* values, plus best_metric."""
    out: dict[str, float] = {}
    metrics = state.get("metrics")
    if isinstance(metrics, dict):
        out.update(numbers(metrics))
    history = state.get("log_history")
    if isinstance(history, list):
        for entry in reversed(history):
            if isinstance(entry, dict) and (evals := numbers(entry, prefix="eval_")):
                out.update(evals)
                break
    best = numbers({"best_metric": state.get("best_metric")})
    out.update(best)
    return out


def read_metrics(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    state = read_json_object(path / STATE_FILE)
    if state is not None:
        out.update(state_metrics(state))
    extra = read_json_object(path / METRICS_FILE)
    if extra is not None:
        out.update(numbers(extra))
    return out
