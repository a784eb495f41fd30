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

from trainops.errors import NotFoundError, RemoteError
from trainops.pipeline.cancel import ACTION_TRAILER, run_files, runs_in
from trainops.spec import Manifest

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
    import yaml

    out = {}
    for name in names:
        docs = [copy.deepcopy(d) for d in yaml.safe_load_all(files[name].decode("utf-8")) if d is not None]
        if exclude_nodes(docs, nodes) == 0:
            raise NotFoundError(f"{name} holds no pod template to keep off {', '.join(nodes)}")
        out[name] = yaml.safe_dump_all(docs, sort_keys=False).encode("utf-8")
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
    from trainops.gitops import read_tree, write_tree
    from trainops.gitops.target import gitops_url

    gitops = manifest.pipeline.spec.gitops
    repo, _ = gitops_url(manifest)
    snapshot = read_tree(repo=repo, branch=gitops.branch, path=gitops.path)
    names = run_files(snapshot.files, run_id)
    if not names:
        held = ", ".join(runs_in(snapshot.files)) or "none"
        raise NotFoundError(f"run {run_id} is not in {gitops.branch}:{gitops.path} of {repo} (runs there: {held})")
    restored = {**snapshot.files, **_excluded_files(snapshot.files, names, nodes)}
    pipeline = manifest.pipeline.metadata.name
    common = {"Trainops-Pipeline": pipeline, "Trainops-Run": run_id, ACTION_TRAILER: "restart", **trailers}
    executable = [name for name in snapshot.files if name.endswith(".sh")]
    stopped = {k: v for k, v in snapshot.files.items() if k not in names}
    removed = write_tree(
        repo=repo,
        branch=gitops.branch,
        path=gitops.path,
        files=stopped,
        message=f"restart {pipeline} run {run_id} away from {', '.join(nodes)} (1/2: stop the job)\n\n{reason}",
        trailers=common,
        executable=executable,
        guard=lambda tip: dict(tip) == snapshot.files,
    )
    if removed.stale:
        raise RemoteError(
            f"{gitops.branch}:{gitops.path} changed while run {run_id} was being restarted; nothing committed",
            hint="run `trainops train watch` again",
        )
    if not wait_gone():
        raise RemoteError(
            f"run {run_id}'s job was removed from git ({str(removed.commit)[:12]}) but is still on the cluster",
            hint=f"once the GitOps controller has pruned it, resubmit: trainops train submit --run-id {run_id}",
        )
    back = write_tree(
        repo=repo,
        branch=gitops.branch,
        path=gitops.path,
        files=restored,
        message=f"restart {pipeline} run {run_id} away from {', '.join(nodes)} (2/2: the job again)\n\n{reason}",
        trailers=common,
        executable=executable,
        guard=lambda tip: dict(tip) == stopped,
    )
    if back.stale:
        raise RemoteError(
            f"{gitops.branch}:{gitops.path} changed while run {run_id}'s job was stopped for a restart "
            f"({str(removed.commit)[:12]}); its job was not put back",
            hint=f"resubmit it: trainops train submit --run-id {run_id} (it resumes from the newest checkpoint)",
        )
    return RestartResult(
        run_id, back.repo, back.branch, back.path, sorted(nodes), removed.commit, back.commit, sorted(names)
    )
