"""Shared helpers for the command-line entry points: stderr logging and JSON stdout."""

from __future__ import annotations

import json
import logging
import math
import sys
from typing import Any

log = logging.getLogger("tiny_llm")


def setup_logging() -> None:
    """Human-readable logs go to stderr; stdout is reserved for JSON."""
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s tiny_llm %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def emit(record: dict[str, Any]) -> None:
    """Print one compact JSON object on its own stdout line and flush it."""
    sys.stdout.write(json.dumps(_clean(record), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> int:
    """Report a fatal error as a single stderr line and return the exit code."""
    sys.stderr.write(f"tiny_llm: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    return code
