"""Cancel a Kubernetes training run the GitOps way: a commit that removes its job.

The GitOps path holds the job of the run submitted last (train/…) beside the tenants'
queues and the cluster topology; cancelling RUN commits the same tree without RUN's job
files, with the trailers `Trainops-Action: cancel` and `Trainops-Run: RUN`. The GitOps
controller then prunes the job (its pods get SIGTERM: the trainer saves, the watcher pushes).
Nothing else is touched; a run that is not the one the path holds is refused (NotFoundError),
and if the path changes between the read and the push nothing is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from trainops.errors import NotFoundError, RemoteError
from trainops.manifest import Manifest
from trainops.render.names import LABEL_RUN_ID

ACTION_TRAILER = "Trainops-Action"


@dataclass(frozen=True)
class CancelResult:
    run_id: str
    repo: str
    branch: str
    path: str
    commit: str | None
    removed: list[str]


def _run_ids(files: dict[str, bytes]) -> dict[str, set[str]]:
    """Each train/ YAML file of the tree → the run-id labels of the objects in it."""

    out: dict[str, set[str]] = {}
    for name, data in sorted(files.items()):
        if name.startswith("train/") and name.endswith((".yaml", ".yml")):
            docs = [d for d in yaml.safe_load_all(data.decode("utf-8")) if isinstance(d, dict)]
            labels = (((d.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN_ID) for d in docs)
            out[name] = {str(label) for label in labels if label}
    return out


def run_files(files: dict[str, bytes], run_id: str) -> list[str]:
    """The train/ files of the tree whose objects carry RUN's run-id label."""
    return [name for name, runs in _run_ids(files).items() if run_id in runs]


def runs_in(files: dict[str, bytes]) -> list[str]:
    return sorted(set().union(*_run_ids(files).values()))


@dataclass(frozen=True)
class RunTree:
    """The GitOps path as read, and the files of RUN's job in it."""

    repo: str
    branch: str
    path: str
    files: dict[str, bytes]
    names: list[str]


def read_run(manifest: Manifest, *, run_id: str) -> RunTree:
    """The GitOps path and RUN's job files in it; NotFoundError naming the runs it holds."""
    from trainops.gitops import read_tree  # lazy: loads subprocess
    from trainops.gitops.target import gitops_url  # lazy: loads subprocess

    gitops = manifest.pipeline.spec.gitops
    repo, _ = gitops_url(manifest)
    snapshot = read_tree(repo=repo, branch=gitops.branch, path=gitops.path)
    names = run_files(snapshot.files, run_id)
    if not names:
        held = ", ".join(runs_in(snapshot.files)) or "none"
        raise NotFoundError(
            f"run {run_id} is not in {gitops.branch}:{gitops.path} of {repo} (runs there: {held})",
            hint="`trainops train status` lists the runs the cluster has",
        )
    return RunTree(repo, gitops.branch, gitops.path, dict(snapshot.files), names)


def commit_files(
    tree: RunTree, *, files: dict[str, bytes], message: str, trailers: dict[str, str], expected: dict[str, bytes]
) -> Any:
    """Commit `files` as the path's whole content, only if the path still holds `expected`
    (the write's result says `stale` otherwise: nothing committed)."""
    from trainops.gitops import write_tree  # lazy: loads subprocess

    return write_tree(
        repo=tree.repo,
        branch=tree.branch,
        path=tree.path,
        files=files,
        message=message,
        trailers=trailers,
        executable=[name for name in files if name.endswith(".sh")],
        guard=lambda tip: dict(tip) == expected,
    )


def cancel_run(manifest: Manifest, *, run_id: str) -> CancelResult:
    """Commit the GitOps path without RUN's job files (see the module docstring)."""
    tree = read_run(manifest, run_id=run_id)
    keep = {name: data for name, data in tree.files.items() if name not in tree.names}
    pipeline = manifest.pipeline.metadata.name
    result = commit_files(
        tree,
        files=keep,
        message=f"cancel {pipeline}: run {run_id}",
        trailers={"Trainops-Pipeline": pipeline, "Trainops-Run": run_id, ACTION_TRAILER: "cancel"},
        expected=tree.files,
    )
    if result.stale:
        raise RemoteError(
            f"{tree.branch}:{tree.path} changed while run {run_id} was being cancelled; nothing committed",
            hint="run `trainops train cancel` again",
        )
    return CancelResult(run_id, result.repo, result.branch, result.path, result.commit, result.removed)
