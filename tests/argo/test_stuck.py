"""A canary whose pods never become Ready: the controller calls the Rollout stuck once its
progress deadline (the manifest's rollout.startupBudget) passes, and `rollout status` says
so with the controller's message.

The canary asks for a GPU resource no node has, so its pod stays Pending (kwok marks only
scheduled pods Ready); the stable keeps serving.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import Live, app_synced, healthy_stable, serving_overlay, start_args, wait
from trainops_testing.cli import run
from trainops_testing.projects import make_project

SYNC = 90.0


def test_a_canary_that_never_becomes_ready_is_reported_stuck(argo: ArgoStack, gitops_http: str, tmp_path: Path) -> None:
    overlay = serving_overlay(gitops_http)
    overlay["spec"]["rollout"]["startupBudget"] = "15s"
    project = make_project(tmp_path / "project", overlay)
    live = Live(argo)
    assert run(*project.cli(*start_args("v1"))).code == 0
    live.bootstrap(project)
    wait(lambda: app_synced(live), timeout=SYNC, what="Argo CD to sync the serving path", argo=argo)
    v1 = wait(lambda: healthy_stable(live), timeout=SYNC, what="v1 Healthy and stable", argo=argo)

    manifest = yaml.safe_load(project.manifest.read_text())
    manifest["spec"]["rollout"]["gpuResource"] = "example.com/no-such-gpu"  # no node advertises it
    project.manifest.write_text(yaml.safe_dump(manifest, sort_keys=False))
    assert run(*project.cli(*start_args("v2"))).code == 0

    def stuck() -> dict[str, object] | None:
        out = run(*project.cli("rollout", "status", "--kubeconfig", str(argo.kubeconfig), "-o", "json"))
        rollout = json.loads(out.stdout)["live"]["rollout"]
        return rollout if rollout and rollout["stuck"] else None

    rollout = wait(stuck, timeout=SYNC, what="the Rollout to be reported stuck", argo=argo)
    conditions = live.rollout()["status"]["conditions"]
    progressing = next(c for c in conditions if c["type"] == "Progressing")
    assert progressing["reason"] == "ProgressDeadlineExceeded"
    assert rollout["message"] == progressing["message"]  # the controller's own words
    text = run(*project.cli("rollout", "status", "--kubeconfig", str(argo.kubeconfig))).stdout
    assert f"stuck: {progressing['message']}" in text
    assert live.replica_sets()[v1] == (4, 4)  # the stable still serves
