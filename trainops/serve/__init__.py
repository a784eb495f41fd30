"""Serving and gray release through GitOps.

The serving objects of rollout.engine (vLLM, SGLang) × rollout.traffic (Argo Rollouts,
Gateway API, KServe) are built as data and checked strictly (trainops.serve.render); every
rollout action is one commit to the GitOps repo, which is the only state
(trainops.serve.flows, trainops.serve.audit); `promote --auto` measures the canary on
Prometheus first (trainops.serve.analysis, trainops.serve.auto).

The stable library API (keyword-only, each returning a result object):
render_rollout, start_rollout, promote, abort, rollback, rollout_status, rollout_history,
abandoned (whether the history shows a release rolled back or aborted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.serve.api import RolloutRender, render_rollout
    from trainops.serve.audit import (
        Abandoned,
        HistoryItem,
        RolloutStatus,
        abandoned,
        rollback,
        rollout_history,
        rollout_status,
    )
    from trainops.serve.auto import auto_promote
    from trainops.serve.flows import ActionResult, abort, promote, start_rollout

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.serve.api": (
            "RolloutRender",
            "render_rollout",
        ),
        "trainops.serve.audit": (
            "Abandoned",
            "HistoryItem",
            "RolloutStatus",
            "abandoned",
            "rollback",
            "rollout_history",
            "rollout_status",
        ),
        "trainops.serve.auto": ("auto_promote",),
        "trainops.serve.flows": (
            "ActionResult",
            "abort",
            "promote",
            "start_rollout",
        ),
    },
)

__all__ = [
    "Abandoned",
    "ActionResult",
    "HistoryItem",
    "RolloutRender",
    "RolloutStatus",
    "abandoned",
    "abort",
    "auto_promote",
    "promote",
    "render_rollout",
    "rollback",
    "rollout_history",
    "rollout_status",
    "start_rollout",
]
