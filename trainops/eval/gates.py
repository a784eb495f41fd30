"""Quality gates: the metrics an eval command wrote, checked against `eval.gates`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainops.errors import CommandFailedError, GateFailedError
from trainops.manifest.common import compare
from trainops.manifest.stages import Gate

MAX_OUTPUT = 16 * 1024 * 1024  # bytes of metrics JSON an eval command may write


@dataclass(frozen=True)
class GateResult:
    """One gate checked: `actual` is None when the metric is missing (the gate then fails)."""

    metric: str
    op: str
    value: float
    actual: float | None
    passed: bool

    def describe(self) -> str:
        if self.actual is None:
            return f"{self.metric} {self.op} {self.value:g}: metric {self.metric!r} is missing"
        return f"{self.metric} {self.op} {self.value:g}: actual {self.actual:g}"


def check_gates(gates: Iterable[Gate], metrics: Mapping[str, float]) -> list[GateResult]:
    """Every gate against the metrics; a gate whose metric is missing fails."""
    out = []
    for gate in gates:
        actual = metrics.get(gate.metric)
        passed = actual is not None and compare(actual, gate.op, gate.value)
        out.append(GateResult(gate.metric, gate.op, gate.value, actual, passed))
    return out


def failing(results: Iterable[GateResult]) -> list[GateResult]:
    return [r for r in results if not r.passed]


def require_passed(results: Iterable[GateResult], *, what: str) -> None:
    """GateFailedError (exit 8) naming every failing gate, unless all passed."""
    failed = failing(results)
    if failed:
        names = "; ".join(r.describe() for r in failed)
        raise GateFailedError(f"{what}: {len(failed)} gate(s) failed: {names}")


def read_metrics(path: Path, *, what: str = "eval.command") -> dict[str, float]:
    """The metrics an eval command wrote: one JSON object whose values are finite numbers.

    Anything else is a CommandFailedError (exit 9) naming the problem: no file, too big,
    not JSON, not an object, or the first key whose value is not a number (and its type).
    """
    where = f"{what} output {path.name} (TRAINOPS_EVAL_OUTPUT)"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CommandFailedError(
            f"{what} exited 0 but wrote no metrics", hint="write one JSON object of numbers to $TRAINOPS_EVAL_OUTPUT"
        ) from None
    if size > MAX_OUTPUT:
        raise CommandFailedError(f"{where} is {size} bytes, more than the {MAX_OUTPUT}-byte limit")
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        first = str(err).splitlines()[0][:120]
        raise CommandFailedError(f"{where} is not JSON ({first})", hint="write one JSON object of numbers") from None
    if not isinstance(doc, dict):
        raise CommandFailedError(
            f"{where} is a JSON {_type_name(doc)}, not an object", hint="write one JSON object of numbers"
        )
    metrics: dict[str, float] = {}
    for key, value in doc.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CommandFailedError(
                f"{where}: key {key!r} is a {_type_name(value)}, not a number",
                hint="metrics are numbers; leave other values out of the output file",
            )
        if not math.isfinite(value):
            raise CommandFailedError(f"{where}: key {key!r} is {value}, not a finite number")
        metrics[key] = float(value)
    return metrics


def _type_name(value: object) -> str:
    return {
        "str": "string",
        "bool": "boolean",
        "NoneType": "null",
        "list": "array",
        "dict": "object",
        "int": "integer",
        "float": "number",
    }.get(type(value).__name__, type(value).__name__)
