"""The gray release carried out by the real controllers on the simulated cluster.

trainops commits; Argo CD (repo-server + application-controller) reads the commit over git's
HTTP transport and syncs the serving path; Argo Rollouts walks the Rollout and moves the
HTTPRoute's weights through the Gateway API plugin. Everything asserted here is read from
the API server, not from the GitOps repo.
"""

from __future__ import annotations

from pathlib import Path

from argo_cluster import ArgoStack

from tests.argo.helpers import NAME, Live, rollout_at, serving_project, start_args, wait
from tests.cli.runner import run

SYNC = 90.0  # Argo CD polls git every 2 s here; the cluster's pods become Ready through kwok


def _ok(*args: str) -> str:
    outcome = run(*args)
    assert outcome.code == 0, outcome.stderr
    return outcome.stdout


def test_canary_walked_to_stable_and_rolled_back(argo: ArgoStack, gitops_http: str, tmp_path: Path) -> None:
    project = serving_project(tmp_path / "project", gitops_http)
    live = Live(argo)

    # v1 is the first release: stable at once. The user applies the Application once.
    _ok(*project.cli(*start_args("v1")))
    live.bootstrap(project)
    app = wait(lambda: live.app() if (live.app().get("status") or {}).get("sync", {}).get("status") == "Synced" else None,
               timeout=SYNC, what="Argo CD to sync the serving path", argo=argo)  # fmt: skip
    assert app["status"]["sync"]["revision"]
    v1 = wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy" and live.rollout()["status"]["stableRS"],
              timeout=SYNC, what="v1 to be the Healthy stable ReplicaSet", argo=argo)  # fmt: skip
    assert live.replica_sets()[v1] == (4, 4)

    # start v2: the first step — header route, 25% on the canary ReplicaSet, paused for the next commit.
    _ok(*project.cli(*start_args("v2")))
    ro = wait(lambda: rollout_at(live, step=2, canary_weight=25), timeout=SYNC, what="the first canary step", argo=argo)
    v2 = ro["status"]["currentPodHash"]
    assert v2 != v1
    assert live.weights() == {f"{NAME}-stable": 75, f"{NAME}-canary": 25}
    assert live.header_routes() == ["ab-test"]
    sets = wait(lambda: (s := live.replica_sets()) if s.get(v2) == (1, 1) else None,
                timeout=SYNC, what="one canary pod Ready", argo=argo)  # fmt: skip
    assert sets[v1] == (4, 4)  # with traffic routing the stable keeps its replicas

    # promote: the next weight.
    _ok(*project.cli("rollout", "promote"))
    wait(lambda: rollout_at(live, step=2, canary_weight=50), timeout=SYNC, what="the second canary step", argo=argo)
    assert live.weights() == {f"{NAME}-stable": 50, f"{NAME}-canary": 50}
    wait(lambda: live.replica_sets().get(v2) == (2, 2), timeout=SYNC, what="two canary pods Ready", argo=argo)

    # promote --full: v2 stable, all traffic on it, the header route gone, v1 scaled down.
    _ok(*project.cli("rollout", "promote", "--full"))
    wait(lambda: (live.rollout().get("status") or {}).get("stableRS") == v2 and live.rollout()["status"]["phase"] == "Healthy",
         timeout=SYNC, what="v2 to become stable", argo=argo)  # fmt: skip
    assert live.header_routes() == []
    assert live.weights().get(f"{NAME}-canary") == 0
    wait(lambda: live.replica_sets().get(v1, (0, 0))[0] == 0, timeout=SYNC + 30, what="v1 scaled down", argo=argo)

    # rollback: Argo CD syncs the restored tree; v1's ReplicaSet serves again.
    _ok(*project.cli("rollout", "rollback"))
    wait(lambda: (live.rollout().get("status") or {}).get("stableRS") == v1 and live.replica_sets()[v1] == (4, 4),
         timeout=SYNC, what="v1 to serve again", argo=argo)  # fmt: skip
