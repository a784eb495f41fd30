"""The one-node Slurm cluster fixture (trainops_testing/slurm_cluster.py): started once per session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest

from trainops_testing.services import ServiceError
from trainops_testing.slurm_cluster import SlurmCluster, SshServer

S = TypeVar("S", SlurmCluster, SshServer)


def _started(service: S) -> Iterator[S]:
    """Start `service`, hand it out, stop it; a service that cannot start fails the test with
    its reason (a missing program: the install command), never a skip."""
    error = None
    try:
        service.start()
    except ServiceError as exc:  # includes MissingDependency
        error = str(exc)
    if error is not None:
        service.stop()
        pytest.fail(error, pytrace=False)
    yield service
    service.stop()


def _with_env(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """munged + slurmctld + slurmd on free ports; ``.env`` (SLURM_CONF) for clients."""
    yield from _started(SlurmCluster(tmp_path_factory.mktemp("slurm")))


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The session cluster, with SLURM_CONF set for this test's trainops calls."""
    return _with_env(slurm_cluster, monkeypatch)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """sshd on a free loopback port: the Slurm login host; ``.port``, ``.ssh_command``."""
    yield from _started(SshServer(tmp_path_factory.mktemp("sshd")))


@pytest.fixture(scope="session")
def slurm_nodes_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Three nodes (slurmd -N per node on this machine): for excluding and draining a node."""
    yield from _started(SlurmCluster(tmp_path_factory.mktemp("slurm3"), nodes=3))


@pytest.fixture
def slurm_nodes(slurm_nodes_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The three-node cluster with SLURM_CONF set; every node resumed (a test may drain one)."""
    _with_env(slurm_nodes_cluster, monkeypatch)
    for node in slurm_nodes_cluster.nodes:
        if slurm_nodes_cluster.node_state(node).rstrip("*~#!%$@+-") not in ("IDLE", "MIXED", "ALLOCATED"):
            slurm_nodes_cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
    return slurm_nodes_cluster
