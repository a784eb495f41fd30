"""Argo CD and Argo Rollouts on the simulated cluster (tests/argo_cluster.py), once per session.

`argo` starts them beside the `kube_cluster` fixture's API server; `gitops_http` is a fresh
GitOps repository served to Argo CD over git's HTTP transport (trainops pushes to it too).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from argo_cluster import ArgoStack
from services import ServiceError


@pytest.fixture(scope="session")
def argo(kube_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoStack]:
    stack = ArgoStack(work=tmp_path_factory.mktemp("argo"), kubeconfig=kube_cluster.kubeconfig,
                      kubectl=str(kube_cluster.kubectl))  # fmt: skip
    try:
        stack.start()
    except ServiceError as err:  # includes MissingDependency: fail with the fix named
        error = str(err)
        stack.stop()
        pytest.fail(error, pytrace=False)
    yield stack
    stack.stop()


@pytest.fixture
def gitops_http(argo: ArgoStack) -> str:
    """The URL of a new, empty GitOps repository on the loopback git server."""
    return argo.new_repo(f"gitops-{uuid.uuid4().hex[:8]}.git")
