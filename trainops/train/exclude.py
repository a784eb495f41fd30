"""Restart a Kubernetes training run away from failed nodes, the GitOps way: two commits.

A job's pod template cannot change in place (batch/v1 Job, JobSet, Volcano and Kubeflow
jobs refuse it), and a new object name would change the rendezvous endpoint the render
derived from it. So the restart is what a person would do through git:

1. commit the GitOps path without the run's job files (`Trainops-Action: restart`); the
   GitOps controller prunes the job (its pods get SIGTERM: the trainer saves, the watcher
   pushes);
2. wait, reading the API server, until the job object is gone;
3. commit the same files back with every pod template excluding the nodes
   (`kubernetes.io/hostname NotIn [...]` in each required node-affinity term); the
   controller creates the job again and its pods resume from the newest checkpoint
   (checkpoint.resume), on the nodes left.

If the path changes between a read and a push, or the job is not pruned in time, nothing
more is committed and the error says where the run stands.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from trainops.errors import NotFoundError, RemoteError
from trainops.manifest import Manifest
from trainops.train.cancel import ACTION_TRAILER, commit_files, read_run

HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class RestartResult:
    run_id: str
    repo: str
    branch: str
    path: str
    excluded: list[str]
    removed_commit: str | None  # the commit without the job
    restored_commit: str | None  # the commit with the job back, away from the nodes
    files: list[str]


def _exclude_in_spec(pod_spec: dict[str, Any], nodes: list[str]) -> None:
    """Every required node-affinity term of one PodSpec also says hostname NotIn nodes."""
    affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        mine = next((e for e in expressions if e.get("key") == HOSTNAME and e.get("operator") == "NotIn"), None)
        if mine is None:
            expressions.append({"key": HOSTNAME, "operator": "NotIn", "values": sorted(nodes)})
        else:
            mine["values"] = sorted(set(mine.get("values") or []) | set(nodes))


def exclude_nodes(obj: Any, nodes: list[str]) -> int:
    """Add the exclusion to every PodSpec inside obj (a mapping holding `containers`); how many."""
    if isinstance(obj, list):
        return sum(exclude_nodes(item, nodes) for item in obj)
    if not isinstance(obj, dict):
        return 0
    if isinstance(obj.get("containers"), list):
        _exclude_in_spec(obj, nodes)
        return 1
    return sum(exclude_nodes(value, nodes) for value in obj.values())


def _excluded_files(files: dict[str, bytes], names: list[str], nodes: list[str]) -> dict[str, bytes]:
    out = {}
    templates = 0
    for name in names:
        docs = [copy.deepcopy(d) for d in yaml.safe_load_all(files[name].decode("utf-8")) if d is not None]
        found = exclude_nodes(docs, nodes)
        templates += found
        # the run's other objects (its PodMonitor, its dashboard) come back as they were
        out[name] = yaml.safe_dump_all(docs, sort_keys=False).encode("utf-8") if found else files[name]
    if templates == 0:
        raise NotFoundError(f"{', '.join(names)} hold no pod template to keep off {', '.join(nodes)}")
    return out


def restart_excluding(
    manifest: Manifest,
    *,
    run_id: str,
    nodes: list[str],
    reason: str,
    trailers: dict[str, str],
    wait_gone: Callable[[], bool],
) -> RestartResult:
    """The two commits of the module docstring; `wait_gone` waits for the job to leave the
    cluster and says whether it did."""
    tree = read_run(manifest, run_id=run_id)
    restored = {**tree.files, **_excluded_files(tree.files, tree.names, nodes)}
    stopped = {k: v for k, v in tree.files.items() if k not in tree.names}
    pipeline = manifest.pipeline.metadata.name
    common = {"Trainops-Pipeline": pipeline, "Trainops-Run": run_id, ACTION_TRAILER: "restart", **trailers}
    away = f"restart {pipeline} run {run_id} away from {', '.join(nodes)}"
    removed = commit_files(
        tree, files=stopped, message=f"{away} (1/2: stop the job)\n\n{reason}", trailers=common, expected=tree.files
    )
    if removed.stale:
        raise RemoteError(
            f"{tree.branch}:{tree.path} changed while run {run_id} was being restarted; nothing committed",
            hint="run `trainops train watch` again",
        )
    if not wait_gone():
        raise RemoteError(
            f"run {run_id}'s job was removed from git ({str(removed.commit)[:12]}) but is still on the cluster",
            hint=f"once the GitOps controller has pruned it, resubmit: trainops train submit --run-id {run_id}",
        )
    back = commit_files(
        tree, files=restored, message=f"{away} (2/2: the job again)\n\n{reason}", trailers=common, expected=stopped
    )
    if back.stale:
        raise RemoteError(
            f"{tree.branch}:{tree.path} changed while run {run_id}'s job was stopped for a restart "
            f"({str(removed.commit)[:12]}); its job was not put back",
            hint=f"resubmit it: trainops train submit --run-id {run_id} (it resumes from the newest checkpoint)",
        )
    return RestartResult(
        run_id, back.repo, back.branch, back.path, sorted(nodes), removed.commit, back.commit, sorted(tree.names)
    )
