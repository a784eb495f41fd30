"""Argo CD and Argo Rollouts on the simulated cluster (trainops_testing/argo_cluster.py), once per session.

`argo` starts them beside the `kube_cluster` fixture's API server; `gitops_http` is a fresh
GitOps repository served to Argo CD over git's HTTP transport (trainops pushes to it too).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from trainops_testing.argo_cluster import ArgoStack
from trainops_testing.kube_bins import binary
from trainops_testing.services import ServiceError

# what serving needs: the control plane, the default scheduler and kwok's Ready pods; and
# Volcano, which places the training job Argo CD syncs from a push (test_push_train)
COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "volcano")


@pytest.fixture(scope="session")
def argo(kube_cluster_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoStack]:
    kube_cluster = kube_cluster_factory(components=COMPONENTS)
    stack = ArgoStack(work=tmp_path_factory.mktemp("argo"), kubeconfig=kube_cluster.kubeconfig,
                      kubectl=str(binary("kubectl")))  # fmt: skip
    try:
        stack.start()
    except ServiceError as err:  # includes MissingDependency: fail with the fix named
        error = str(err)
        stack.stop()
        kube_cluster.stop()
        pytest.fail(error, pytrace=False)
    yield stack
    stack.stop()
    kube_cluster.stop()


@pytest.fixture
def gitops_http(argo: ArgoStack) -> Iterator[str]:
    """The URL of a new, empty GitOps repository on the loopback git server; afterwards the
    Applications and the serving namespace go, so the next test starts from an empty cluster
    (the tests serve the same pipeline under the same names)."""
    yield argo.new_repo(f"gitops-{uuid.uuid4().hex[:8]}.git")
    argo.kubectl_run("delete", "applications.argoproj.io", "--all", "-n", "argocd", "--wait=true")
    argo.kubectl_run("delete", "namespace", "--ignore-not-found", "--wait=true", "--timeout=120s", "tiny-llm")
