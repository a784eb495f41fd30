"""Serving and gray release through GitOps.

The serving objects of rollout.engine (vLLM, SGLang) × rollout.traffic (Argo Rollouts,
Gateway API, KServe) are built as data and checked strictly (trainops.rollout.render); every
rollout action is one commit to the GitOps repo, which is the only state
(trainops.rollout.flows, trainops.rollout.audit); `promote --auto` measures the canary on
Prometheus first (trainops.rollout.analysis, trainops.rollout.auto).

The stable library API (keyword-only, each returning a result object):
render_rollout, start_rollout, promote, abort, rollback, rollout_status, rollout_history,
abandoned (whether the history shows a release rolled back or aborted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.rollout.api import RolloutRender, render_rollout
    from trainops.rollout.audit import (
        Abandoned,
        HistoryItem,
        RolloutStatus,
        abandoned,
        rollback,
        rollout_history,
        rollout_status,
    )
    from trainops.rollout.auto import auto_promote
    from trainops.rollout.flows import ActionResult, abort, promote, start_rollout

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.rollout.api": (
            "RolloutRender",
            "render_rollout",
        ),
        "trainops.rollout.audit": (
            "Abandoned",
            "HistoryItem",
            "RolloutStatus",
            "abandoned",
            "rollback",
            "rollout_history",
            "rollout_status",
        ),
        "trainops.rollout.auto": ("auto_promote",),
        "trainops.rollout.flows": (
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
