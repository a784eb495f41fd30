"""Does the cluster have nodes for the whole gang? A gang scheduler binds all of a job's pods or
none: a job of more nodes than the cluster has nodes that fit one of its pods waits forever,
saying only that it is unschedulable. `validate --kubeconfig` asks before anything is
committed.

A node fits one pod when it is schedulable, carries the pod's nodeSelector labels and its
allocatable holds what the training container requests of every resource
(train.resources, train.gpusPerNode): what the node's other pods use is not counted, so
this finds a gang that can never run, not one that must wait for others to finish. Taints
are not matched against tolerations.
"""

from __future__ import annotations

from typing import Any

from trainops.cluster.client import Cluster
from trainops.errors import Problem
from trainops.manifest import Manifest
from trainops.manifest.load import field_problem
from trainops.render.pod import main_resources
from trainops.render.quantity import parse

# the schedulers whose jobs are gangs of train.nodes pods of one shape
GANG_SCHEDULERS = frozenset({"kubernetes"})


def fits(node: dict[str, Any], requests: dict[str, Any], selector: dict[str, str]) -> bool:
    """Whether one pod with these requests and nodeSelector fits on the empty node."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return all(name in allocatable and parse(allocatable[name]) >= parse(value) for name, value in requests.items())


def gang_problems(cluster: Cluster, manifest: Manifest) -> list[Problem]:
    """train.nodes larger than the nodes that fit one pod: a Problem at train.nodes."""
    train = manifest.pipeline.spec.train
    if train is None or train.scheduler not in GANG_SCHEDULERS:
        return []
    requests = main_resources(train)
    nodes = cluster.list("v1", "Node")
    fitting = sum(fits(node, requests, train.node_selector) for node in nodes)
    if fitting >= train.nodes:
        return []
    wanted = ", ".join(f"{value} {name}" for name, value in requests.items()) or "nothing"
    where = f" with labels {train.node_selector}" if train.node_selector else ""
    text = (
        f"a gang of {train.nodes} pods, each asking {wanted}{where}: {fitting} of the cluster's {len(nodes)} nodes "
        f"can hold one, so the scheduler would bind none of them, ever: set nodes to at most {fitting}, or add nodes"
    )
    return [field_problem(manifest.path, env=manifest.env, loc=("spec", "train", "nodes"), message=text)]
