"""The gray release carried out by the real controllers on the simulated cluster.

trainops commits; Argo CD (repo-server + application-controller) reads the commit over git's
HTTP transport and syncs the serving path; Argo Rollouts walks the Rollout and moves the
HTTPRoute's weights through the Gateway API plugin. Everything asserted here is read from
the API server, not from the GitOps repo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import (
    NAME,
    Live,
    app_synced,
    healthy_stable,
    replicas_are,
    rollout_at,
    serving_project,
    start_args,
    wait,
)
from trainops_testing.cli import run
from trainops_testing.projects import Project

SYNC = 90.0  # Argo CD polls git every 2 s here; the cluster's pods become Ready through kwok


def _ok(*args: str) -> str:
    outcome = run(*args)
    assert outcome.code == 0, outcome.stderr
    return outcome.stdout


def _step_reported(project: Any, argo: ArgoStack, ro: dict[str, Any], *, step: str) -> None:
    """`rollout status` names trainops' step (git's), with the controller's raw index beside
    it: the Rollout's steps of a commit from the second step on start with the previous
    weight, so the controller's index runs ahead of the step a user counts."""
    args = project.cli("rollout", "status", "--kubeconfig", str(argo.kubeconfig))
    data = json.loads(_ok(*args, "-o", "json"))
    rollout = data["live"]["rollout"]
    index, steps = ro["status"]["currentStepIndex"], len(ro["spec"]["strategy"]["canary"]["steps"])
    assert data["step"] == step  # git's
    assert (rollout["step"], rollout["doing"]) == (step, "paused until the next promote")
    assert (rollout["controllerStep"], rollout["controllerSteps"]) == (index, steps)
    text = _ok(*args)
    assert f"step {step} (paused until the next promote)" in text
    assert f"controller: step index {index} of its {steps} steps" in text


def test_canary_walked_to_stable_and_rolled_back(argo: ArgoStack, gitops_http: str, tmp_path: Path) -> None:
    project = serving_project(tmp_path / "project", gitops_http)
    live = Live(argo)
    canary, stable = f"{NAME}-canary", f"{NAME}-stable"

    # v1 is the first release: stable at once. The user applies the Application once.
    _ok(*project.cli(*start_args("v1")))
    live.bootstrap(project)
    app = wait(lambda: app_synced(live), timeout=SYNC, what="Argo CD to sync the serving path", argo=argo)
    assert app["status"]["sync"]["revision"]
    v1 = wait(lambda: healthy_stable(live), timeout=SYNC, what="v1 Healthy and stable", argo=argo)
    assert live.replica_sets()[v1] == (4, 4)

    # start v2: the first step — header route, 25% on the canary, paused for the next commit.
    _ok(*project.cli(*start_args("v2")))
    ro = wait(lambda: rollout_at(live, canary_weight=25), timeout=SYNC, what="the first canary step", argo=argo)
    v2 = ro["status"]["currentPodHash"]
    assert v2 != v1
    assert live.weights() == {stable: 75, canary: 25}
    assert live.header_routes() == ["ab-test"]
    _step_reported(project, argo, ro, step="1/3 25%")
    sets = wait(lambda: replicas_are(live, v2, (1, 1)), timeout=SYNC, what="one canary pod Ready", argo=argo)
    assert sets[v1] == (4, 4)  # with traffic routing the stable keeps its replicas

    # the registry browser's rollout page: git's state, and the cluster's with a kubeconfig
    page = rollout_page(project, kubeconfig=argo.kubeconfig, index=tmp_path / "ui.sqlite")
    assert f"{stable} 75, {canary} 25; header routes: ab-test" in page
    assert '<td id="phase">Paused</td>' in page and f"tiny-llm-{v2}" in page
    assert "application tiny-llm-serve-default" not in page and ">tiny-llm-serve-default</td>" in page
    assert 'id="live-none"' in rollout_page(project, kubeconfig=None, index=tmp_path / "ui2.sqlite")
    release = rollout_page(project, kubeconfig=argo.kubeconfig, index=tmp_path / "ui3.sqlite",
                           release="tiny-llm/model:v2")  # fmt: skip
    assert "as the canary at 25% (step " in release  # the release's page, git's state and the cluster's
    assert f"; in the cluster: Paused, {stable} 75, {canary} 25" in release

    # promote: the next weight.
    _ok(*project.cli("rollout", "promote"))
    ro = wait(lambda: rollout_at(live, canary_weight=50), timeout=SYNC, what="the second canary step", argo=argo)
    _step_reported(project, argo, ro, step="2/3 50%")
    assert ro["status"]["currentStepIndex"] == 3  # one past trainops' count: the held 25% comes first
    assert live.weights() == {stable: 50, canary: 50}
    assert live.header_routes() == ["ab-test"]  # kept across the restart of the steps
    wait(lambda: replicas_are(live, v2, (2, 2)), timeout=SYNC, what="two canary pods Ready", argo=argo)

    # promote --full: v2 stable, all traffic on it, the header route gone, v1 scaled down.
    _ok(*project.cli("rollout", "promote", "--full"))
    wait(lambda: healthy_stable(live) == v2, timeout=SYNC, what="v2 to become stable", argo=argo)
    # the controller reports Healthy on one reconcile and takes its managed route off the
    # HTTPRoute on a later one: wait for the route, not just the status
    wait(lambda: live.header_routes() == [] and live.weights().get(canary) == 0, timeout=SYNC,
         what="the header route removed and the canary at weight 0", argo=argo)  # fmt: skip
    wait(lambda: replicas_are(live, v1, (0, 0)), timeout=SYNC + 30, what="v1 scaled down", argo=argo)

    # rollback: Argo CD syncs the restored tree; v1's ReplicaSet serves again.
    _ok(*project.cli("rollout", "rollback"))
    wait(lambda: healthy_stable(live) == v1, timeout=SYNC, what="v1 stable again", argo=argo)
    wait(lambda: replicas_are(live, v1, (4, 4)), timeout=SYNC, what="v1's four pods Ready", argo=argo)


def rollout_page(project: Project, *, kubeconfig: Path | None, index: Path, release: str | None = None) -> str:
    """The registry browser's /rollout page (served over HTTP on loopback), started with the
    project's manifest and, when given, the kubeconfig; with `release`, that release's
    artifact page instead."""
    import requests
    from ui.conftest import ServerThread

    from trainops.cluster.access import ClusterAccess
    from trainops.registry.context import open_registries
    from trainops.ui.app import create_app
    from trainops.ui.index import Index, refresh
    from trainops.ui.views import Browser
    from trainops_testing.services import free_port

    opened = open_registries(file=str(project.manifest), env=None, insecure=False)
    with opened.registries as registries:
        url = registries.default_registry
        assert url is not None
        db = Index(index)
        assert not refresh(db, registries, urls=[url]).errors
        browser = Browser(index=db, registries=registries, urls=[url], manifest=opened.manifest,
                          cluster=ClusterAccess(str(kubeconfig)) if kubeconfig else None)  # fmt: skip
        page = "/rollout"
        if release is not None:
            from trainops.registry.store import resolve

            page = f"/artifact/{resolve(registries, ref=registries.ref(release)).manifest.digest}"
        server = ServerThread(create_app(browser), free_port())
        server.start()
        try:
            response = requests.get(f"http://127.0.0.1:{server.port}{page}", timeout=30)
        finally:
            server.stop()
    assert response.status_code == 200, response.text
    return response.text
