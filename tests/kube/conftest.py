"""The scheduling tests' cluster, one per module: a module may set SHAPE (default 8 kwok nodes
× 8 GPUs in 2 racks under 1 spine), COMPONENTS (default all) and CLUSTER_OPTIONS (more of
KubeCluster's fields, such as feature gates). Every test makes its own
namespace and tenants and removes its jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from trainops_testing.kube_cluster import Shape


@pytest.fixture(scope="module")
def sim(kube_cluster_factory: Callable[..., Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    kwargs: dict[str, Any] = {"shape": getattr(request.module, "SHAPE", Shape(nodes=8, racks=2, spines=1))}
    if hasattr(request.module, "COMPONENTS"):
        kwargs["components"] = request.module.COMPONENTS
    kwargs.update(getattr(request.module, "CLUSTER_OPTIONS", {}))  # KubeCluster's options (feature gates)
    cluster = kube_cluster_factory(**kwargs)
    yield cluster
    cluster.stop()
