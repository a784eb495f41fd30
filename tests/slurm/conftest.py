"""The one-node Slurm cluster fixture (tests/slurm_cluster.py): started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from services import ServiceError
from slurm_cluster import SlurmCluster, SshServer


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """munged + slurmctld + slurmd on free ports; ``.env`` (SLURM_CONF) for clients."""
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    error = None
    try:
        cluster.start()
    except ServiceError as exc:  # includes MissingDependency: fail with the install command
        error = str(exc)
    if error is not None:
        cluster.stop()
        pytest.fail(error, pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The session cluster, with SLURM_CONF set for this test's trainops calls."""
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    return slurm_cluster


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """sshd on a free loopback port: the Slurm login host; ``.port``, ``.ssh_command``."""
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    error = None
    try:
        server.start()
    except ServiceError as exc:
        error = str(exc)
    if error is not None:
        server.stop()
        pytest.fail(error, pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def slurm_nodes_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Three nodes (slurmd -N per node on this machine): for excluding and draining a node."""
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm3"), nodes=3)
    error = None
    try:
        cluster.start()
    except ServiceError as exc:
        error = str(exc)
    if error is not None:
        cluster.stop()
        pytest.fail(error, pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm_nodes(slurm_nodes_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The three-node cluster with SLURM_CONF set; every node resumed (a test may drain one)."""
    for name, value in slurm_nodes_cluster.env.items():
        monkeypatch.setenv(name, value)
    for node in slurm_nodes_cluster.nodes:
        if slurm_nodes_cluster.node_state(node).rstrip("*~#!%$@+-") not in ("IDLE", "MIXED", "ALLOCATED"):
            slurm_nodes_cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
    return slurm_nodes_cluster
