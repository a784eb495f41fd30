"""Evaluate a checkpoint, check its quality gates, push the report as a referrer of it.

Entry points: `run_eval` (run eval.command against a checkpoint; returns the result even
when a gate failed), `require_passed` (GateFailedError, exit 8, when one did),
`list_evals` (the reports of a checkpoint), `render_eval` / `submit_eval` (the same run as
a Kubernetes Job, rendered or committed to GitOps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.eval.gates import GateResult, check_gates
    from trainops.eval.report import EvalEntry, EvalReport, list_evals
    from trainops.eval.run import EvalResult, require_passed, run_eval

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.eval.gates": (
            "GateResult",
            "check_gates",
        ),
        "trainops.eval.report": (
            "EvalEntry",
            "EvalReport",
            "list_evals",
        ),
        "trainops.eval.run": (
            "EvalResult",
            "require_passed",
            "run_eval",
        ),
    },
)

__all__ = [
    "EvalEntry",
    "EvalReport",
    "EvalResult",
    "GateResult",
    "check_gates",
    "list_evals",
    "require_passed",
    "run_eval",
]
