"""A disaggregated release carried out by the real controllers: trainops commits, Argo CD (repo-server
and application-controller) syncs each commit from git over HTTP, the LeaderWorkerSet controller
v0.10.0 makes both roles of every DisaggregatedSet slice, kwok makes the pods Ready. A canary walked
to stable and a second one aborted, each step read from the API server once Argo CD reports the
commit synced: the pools' revisions, the HTTPRoute's weights, the pods of each pair, and where
they run (a slice's prefill and decode in one rack). No Argo Rollouts: with traffic gateway-api
trainops sets the weights itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.test_disagg import pool_revisions, route_weights, served_pairs, slice_placement
from tests.rollout.test_disagg import TOPOLOGY, overlay
from trainops.render.crds import VENDORED
from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.argo_live import Live, wait
from trainops_testing.cli import run
from trainops_testing.kube_bins import binary
from trainops_testing.kube_cluster import KubeCluster, Shape
from trainops_testing.projects import IMAGE, Project, make_project
from trainops_testing.services import ServiceError, git_env

APP = "tiny-llm-serve-default"
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "lws")
SYNC = 120.0


@pytest.fixture(scope="module")
def stack(
    kube_cluster_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KubeCluster, ArgoStack]]:
    cluster = kube_cluster_factory(shape=Shape(nodes=8, gpus_per_node=8, racks=4, spines=2), components=COMPONENTS)
    cluster.install_crds([VENDORED / "gie-inferencepool.yaml"])
    work = tmp_path_factory.mktemp("argo")
    argo = ArgoStack(work=work, kubeconfig=cluster.kubeconfig, kubectl=str(binary("kubectl")), rollouts=False)
    try:
        argo.start()
    except ServiceError as err:
        error = str(err)
        argo.stop()
        cluster.stop()
        pytest.fail(error, pytrace=False)
    yield cluster, argo
    argo.stop()
    cluster.stop()


@pytest.fixture(autouse=True)
def _git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _project(root: Path, repo: str) -> Project:
    data = overlay(spec=TOPOLOGY, placement="rack")
    data["spec"]["gitops"] = {"repo": repo, "branch": "main", "path": "clusters/dev", "argocd": {}}
    data["spec"]["slo"] = None
    return make_project(root, data)


def _commit(project: Project, *args: str) -> str:
    outcome = run("rollout", *project.cli(*args, "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    commit: str = json.loads(outcome.stdout)["commit"]
    return commit


def _synced(cluster: KubeCluster, argo: ArgoStack, commit: str, what: str) -> dict[str, str]:
    """Once Argo CD reports `commit` synced and the controllers have every pair's pods Ready: the
    pools' revisions as the cluster holds them."""
    live = Live(argo)

    def probe() -> dict[str, str] | None:
        sync = live.get(f"application/{APP}", namespace="argocd").get("status", {}).get("sync", {})
        if sync.get("revision") != commit or sync.get("status") != "Synced":
            return None
        pools = pool_revisions(cluster)
        served = served_pairs(cluster)
        return pools if served == {name.rsplit("-", 1)[1]: rev for name, rev in pools.items()} else None

    return wait(probe, timeout=SYNC, what=f"{what} ({commit[:12]}) synced and its pairs Ready", argo=argo)


def test_argo_cd_syncs_a_disaggregated_canary_to_stable_and_an_abort_back(
    stack: tuple[KubeCluster, ArgoStack], tmp_path: Path
) -> None:
    cluster, argo = stack
    project = _project(tmp_path / "p", argo.new_repo("gitops-disagg.git"))
    first = _commit(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    Live(argo).bootstrap(project)  # what a user does once: apply the Application trainops rendered
    pools = _synced(cluster, argo, first, "start v1")
    v1 = pools["tiny-llm-stable"]
    assert route_weights(cluster) == {"tiny-llm-stable": 100}
    stable = slice_placement(cluster, "stable")
    assert all(len(s["racks"]) == 1 and s["roles"] == {"prefill", "decode"} for s in stable.values()), stable

    pools = _synced(cluster, argo, _commit(project, "start", "tiny-llm/model:v2", "--image", IMAGE), "start v2")
    v2 = pools["tiny-llm-canary"]
    assert pools["tiny-llm-stable"] == v1 and v2 != v1
    assert route_weights(cluster) == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    for weight in (50, 100):
        _synced(cluster, argo, _commit(project, "promote"), f"promote to {weight}%")
        assert route_weights(cluster) == {"tiny-llm-stable": 100 - weight, "tiny-llm-canary": weight}
    pools = _synced(cluster, argo, _commit(project, "promote"), "promote to stable")
    assert pools == {"tiny-llm-stable": v2} and route_weights(cluster) == {"tiny-llm-stable": 100}
    # Argo CD pruned the canary's pair: only v2's pods serve
    assert {p["metadata"]["labels"]["trainops.dev/revision"] for p in _serving_pods(cluster)} == {v2}

    _synced(cluster, argo, _commit(project, "start", "tiny-llm/model:v3", "--image", IMAGE), "start v3")
    assert route_weights(cluster) == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    pools = _synced(cluster, argo, _commit(project, "abort"), "abort v3")
    assert pools == {"tiny-llm-stable": v2} and route_weights(cluster) == {"tiny-llm-stable": 100}
    assert {p["metadata"]["labels"]["trainops.dev/revision"] for p in _serving_pods(cluster)} == {v2}


def _serving_pods(cluster: KubeCluster) -> list[dict[str, Any]]:
    return list(cluster.api.list("v1", "Pod", "tiny-llm", selector="llm-d.ai/role"))
