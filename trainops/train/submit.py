"""`trainops train render` and `trainops train submit`: the rendered tree on disk or in git.

Both render the same tree (the training job of the manifest's scheduler, plus the tenants'
queues). `render` writes it to a directory; `submit` commits it under spec.gitops.path in
the GitOps repository, with trailers naming the pipeline, image digest and run id, and
pushes, re-applying the tree on top when another writer pushed first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops import runid
from trainops.errors import InputError, ManifestError
from trainops.gitinfo import git_state
from trainops.gitops import write_tree
from trainops.gitops.target import gitops_url
from trainops.image.pinned import training_image
from trainops.manifest import Manifest
from trainops.manifest.stages import TrainSpec
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.render.directory import write_rendered
from trainops.render.image import cluster_image
from trainops.render.names import object_name
from trainops.train.slurm_jobs import submit_job

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess
    from trainops.render import Rendered


def _executable(path: str) -> bool:
    """Rendered scripts (the sbatch script) are executable, on disk and in git."""
    return path.endswith(".sh")


@dataclass(frozen=True)
class RenderTreeResult:
    directory: str
    files: list[str]
    image: str
    run_id: str


@dataclass(frozen=True)
class SubmitResult:
    repo: str
    branch: str
    path: str
    commit: str | None
    changed: bool
    attempts: int
    files: list[str]
    removed: list[str]
    image: str
    run_id: str
    job_id: str | None = None  # the Slurm job (scheduler slurm)


@dataclass(frozen=True)
class _Run:
    """A rendered tree and what it runs: `image` as the job names it, `pinned` the image
    reference (None on bare metal with no --image: the job runs no container)."""

    rendered: Rendered
    image: str
    pinned: Reference | None
    commit: str | None


def _render(manifest: Manifest, *, image: str | None, run_id: str, insecure: bool) -> _Run:
    from trainops.render import render_all  # lazy: loads ssl, socketserver

    train = manifest.require_train()
    if train.scheduler == "local":
        raise InputError(
            "train.scheduler is local: there is nothing to render for a cluster",
            hint="run it with `trainops train run --local`, or pick another --env / scheduler",
        )
    runid.check(run_id)
    pinned = None
    if image is None and _bare_metal(train):
        from trainops.render.api import placeholder_image  # lazy: loads ssl, socketserver

        text = placeholder_image(manifest)  # no container: the job runs no image
    else:
        registries = Registries.for_manifest(manifest, insecure=insecure)
        try:
            pinned = training_image(manifest, registries, image=image)
        finally:
            registries.close()
        text = cluster_image(pinned)
    git = git_state(manifest.root)
    commit = git.commit if git else None
    return _Run(render_all(manifest, image=text, run_id=run_id, commit=commit), text, pinned, commit)


def render_tree(
    manifest: Manifest, *, out: Path, run_id: str, image: str | None = None, insecure: bool = False
) -> RenderTreeResult:
    """Write the rendered tree to `out`, all or nothing.

    `out` must be new, empty, or a tree trainops rendered before (it holds the marker file);
    it is replaced as a whole, so files of an earlier render that this one lacks go away.
    """

    run = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    marker = f"run {run_id}\nimage {run.image}\n"
    names = write_rendered(out, run.rendered.files, marker=marker, executable=_executable)
    return RenderTreeResult(directory=str(out.resolve()), files=names, image=run.image, run_id=run_id)


def _require_job_kind(train: TrainSpec, access: ClusterAccess) -> None:
    from trainops.cluster.client import connect  # lazy: loads ssl
    from trainops.train.kube_jobs import required_kinds  # lazy: loads ssl, socketserver

    with connect(access) as cluster:
        cluster.require_served(
            [{"apiVersion": api_version, "kind": kind} for api_version, kind in required_kinds(train)]
        )


def _bare_metal(train: TrainSpec) -> bool:
    return train.scheduler == "slurm" and train.slurm is not None and train.slurm.runtime == "bare-metal"


def submit(
    manifest: Manifest,
    *,
    run_id: str,
    image: str | None = None,
    insecure: bool = False,
    max_attempts: int = 5,
    trailers: Mapping[str, str] | None = None,
    access: ClusterAccess | None = None,
) -> SubmitResult:
    """Commit the rendered tree to the GitOps repository and push it (with the caller's
    extra `trailers`, e.g. the stage key of `trainops run`).

    With `access` (a cluster named), the cluster must serve the training job's kind first
    (its CRD installed): else NotFoundError says which and what installs it, and nothing is
    committed. For a TrainJob the cluster must also run the Trainer controller and have the
    runtime it names (trainops.cluster.controllers): else a ManifestError at the field.

    With scheduler slurm the script is also submitted with sbatch (trainops.train.slurm_jobs:
    held until the commit, which names the job, is pushed; nothing is committed if sbatch
    refuses it).
    """

    run = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    if access is not None and manifest.require_train().scheduler != "slurm":
        _require_job_kind(manifest.require_train(), access)
        _check_cluster(manifest, access)
    rendered = run.rendered
    gitops = manifest.pipeline.spec.gitops
    repo, create = gitops_url(manifest)
    name = manifest.pipeline.metadata.name
    train = manifest.require_train()
    written = {"Trainops-Pipeline": name, "Trainops-Run": run_id}
    if run.pinned is not None:
        written["Trainops-Image"] = run.image
    if run.pinned is not None and run.pinned.digest:
        written["Trainops-Artifact"] = run.pinned.digest
    if run.commit:
        written["Trainops-Commit"] = run.commit
    written.update(trailers or {})

    def commit(extra: dict[str, str]) -> Any:
        return write_tree(
            repo=repo,
            branch=gitops.branch,
            path=gitops.path,
            files={item.path: item.text for item in rendered.files},
            executable=[item.path for item in rendered.files if _executable(item.path)],
            message=f"train {name}: run {run_id} on {train.scheduler}",
            trailers={**written, **extra},
            create=create,
            max_attempts=max_attempts,
        )

    job_id = None
    if train.scheduler == "slurm":
        script = next(item.text for item in rendered.files if item.path.endswith(".sh"))
        job = submit_job(manifest, script=script, run_id=run_id, job_name=object_name(name, run_id), commit=commit)
        result, job_id = job.commit, job.job_id
    else:
        result = commit({})
    return SubmitResult(
        repo=result.repo,
        branch=result.branch,
        path=result.path,
        commit=result.commit,
        changed=result.changed,
        attempts=result.attempts,
        files=result.files,
        removed=result.removed,
        image=run.image if run.pinned is not None else "",
        run_id=run_id,
        job_id=job_id,
    )


def _check_cluster(manifest: Manifest, access: ClusterAccess) -> None:
    from trainops.cluster.client import connect  # lazy: loads ssl
    from trainops.cluster.controllers import controller_problems  # lazy: loads ssl

    with connect(access) as cluster:
        problems = controller_problems(cluster, manifest)
    if problems:
        raise ManifestError(problems, hint="nothing was committed")


@dataclass(frozen=True)
class RenderedText:
    files: dict[str, str]  # path in the tree → content
    image: str
    run_id: str

    @property
    def text(self) -> str:
        """The tree as one text for a terminal: each file under a `# file:` comment."""
        parts = []
        for path, content in self.files.items():
            body = content if content.endswith("\n") else content + "\n"
            parts.append(f"# file: {path}\n{body}")
        return "---\n".join(parts)


def render_text(manifest: Manifest, *, run_id: str, image: str | None = None, insecure: bool = False) -> RenderedText:
    """The rendered tree in memory (nothing written)."""
    run = _render(manifest, image=image, run_id=run_id, insecure=insecure)
    return RenderedText({item.path: item.text for item in run.rendered.files}, run.image, run_id)
