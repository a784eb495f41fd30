"""KServe's controller manager in Standard (RawDeployment) mode on the simulated cluster, once
per module: the control plane, the default scheduler and kwok's Ready pods, then KServe
(trainops_testing/kserve_cluster.py) with the cluster-wide default deployment mode Standard."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from trainops_testing.kserve_cluster import start_kserve
from trainops_testing.kube_cluster import Shape
from trainops_testing.services import ServiceError

SERVING = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")


@pytest.fixture(scope="module")
def kserve(kube_cluster_factory: Callable[..., Any]) -> Iterator[Any]:
    cluster = kube_cluster_factory(shape=Shape(nodes=2, racks=1), components=SERVING)
    try:
        start_kserve(cluster, default_mode="Standard")
    except ServiceError as err:  # includes MissingDependency: fail with the build command named
        cluster.stop()
        pytest.fail(str(err), pytrace=False)
    yield cluster
    cluster.stop()
