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

from trainops.errors import NotFoundError, RemoteError
from trainops.render.names import LABEL_RUN_ID
from trainops.spec import Manifest

ACTION_TRAILER = "Trainops-Action"


@dataclass(frozen=True)
class CancelResult:
    run_id: str
    repo: str
    branch: str
    path: str
    commit: str | None
    removed: list[str]


def run_files(files: dict[str, bytes], run_id: str) -> list[str]:
    """The train/ files of the tree whose objects carry RUN's run-id label."""
    import yaml

    out = []
    for name, data in sorted(files.items()):
        if not name.startswith("train/") or not name.endswith((".yaml", ".yml")):
            continue
        docs = [d for d in yaml.safe_load_all(data.decode("utf-8")) if isinstance(d, dict)]
        if any(((d.get("metadata") or {}).get("labels") or {}).get(LABEL_RUN_ID) == run_id for d in docs):
            out.append(name)
    return out


def runs_in(files: dict[str, bytes]) -> list[str]:
    import yaml

    runs = set()
    for name, data in files.items():
        if name.startswith("train/") and name.endswith((".yaml", ".yml")):
            for doc in yaml.safe_load_all(data.decode("utf-8")):
                label = ((doc or {}).get("metadata") or {}).get("labels", {}).get(LABEL_RUN_ID)
                if label:
                    runs.add(str(label))
    return sorted(runs)


def cancel_run(manifest: Manifest, *, run_id: str) -> CancelResult:
    """Commit the GitOps path without RUN's job files (see the module docstring)."""
    from trainops.gitops import read_tree, write_tree
    from trainops.gitops.target import gitops_url

    gitops = manifest.pipeline.spec.gitops
    repo, _ = gitops_url(manifest)
    snapshot = read_tree(repo=repo, branch=gitops.branch, path=gitops.path)
    doomed = run_files(snapshot.files, run_id)
    if not doomed:
        held = ", ".join(runs_in(snapshot.files)) or "none"
        raise NotFoundError(
            f"run {run_id} is not in {gitops.branch}:{gitops.path} of {repo} (runs there: {held})",
            hint="`trainops train status` lists the runs the cluster has",
        )
    keep = {name: data for name, data in snapshot.files.items() if name not in doomed}
    result = write_tree(
        repo=repo,
        branch=gitops.branch,
        path=gitops.path,
        files=keep,
        message=f"cancel {manifest.pipeline.metadata.name}: run {run_id}",
        trailers={
            "Trainops-Pipeline": manifest.pipeline.metadata.name,
            "Trainops-Run": run_id,
            ACTION_TRAILER: "cancel",
        },
        executable=[name for name in keep if name.endswith(".sh")],
        guard=lambda tip: dict(tip) == snapshot.files,
    )
    if result.stale:
        raise RemoteError(
            f"{gitops.branch}:{gitops.path} changed while run {run_id} was being cancelled; nothing committed",
            hint="run `trainops train cancel` again",
        )
    return CancelResult(run_id, result.repo, result.branch, result.path, result.commit, result.removed)
