"""The cluster executor: the training job goes to the cluster through GitOps.

The train stage renders the job for `train.scheduler`, commits it to the GitOps repository
with a `Trainops-Stage-Key` trailer, then waits for the checkpoints the job's sidecar pushes
(those whose lineage names the run), reporting each, until none has arrived for a quiet
period (the run is taken as finished) or the timeout passes. With a kubeconfig
(`trainops run --kubeconfig`), the job's own status on the cluster says when it finished
(and whether it failed) instead of the quiet period. Running `trainops run` again
finds the commit with this stage key in the GitOps history and waits on that run instead of
submitting the job twice.
"""

from __future__ import annotations

import logging
import time

from trainops.errors import CommandFailedError, InputError, NotFoundError, RemoteError
from trainops.pipeline.executors import local
from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.stage import Outcome, Output

STAGE_KEY_TRAILER = "Trainops-Stage-Key"
log = logging.getLogger(__name__)


def image_skip(ctx: StageContext) -> Outcome | None:
    return None  # a cluster needs an image: the stage builds it or fails saying why


def image_stage(ctx: StageContext) -> Outcome:
    problem = local.image_skip(ctx)
    if problem is not None:
        raise InputError(
            f"the cluster executor needs an image, and none can be built here: {problem.skipped}",
            hint="set train.image to a pushed image, set image.base with the layer builder, or set DOCKER_HOST",
        )
    return local.image_stage(ctx)


def submitted_run(ctx: StageContext) -> str | None:
    """The run id of an earlier submit of this very stage key, from the GitOps history."""
    from trainops.gitops import history  # lazy: loads subprocess
    from trainops.gitops.target import gitops_url  # lazy: loads subprocess

    gitops = ctx.manifest.pipeline.spec.gitops
    repo, _ = gitops_url(ctx.manifest)
    try:
        entries = history(repo=repo, branch=gitops.branch, path=gitops.path, limit=200)
    except NotFoundError:
        return None
    for entry in entries:
        if entry.trailers.get(STAGE_KEY_TRAILER) == ctx.key:
            return entry.trailers.get("Trainops-Run")
    return None


def train_stage(ctx: StageContext) -> Outcome:
    from trainops.train.submit import submit  # lazy: loads subprocess

    image = ctx.input("image", "image")
    run_id = submitted_run(ctx)
    notes: list[str] = []
    if run_id is None:
        run_id = ctx.stage_run_id()
        result = submit(
            ctx.manifest, run_id=run_id, image=image.ref, insecure=ctx.insecure, trailers={STAGE_KEY_TRAILER: ctx.key}
        )
        notes.append(f"submitted run {run_id}: GitOps commit {str(result.commit)[:12]}")
    else:
        notes.append(f"run {run_id} was submitted before for this key: waiting for it, not submitting again")
    for note in notes:
        ctx.note(note)
    following = wait_for_job if ctx.cluster is not None else wait_for_checkpoints
    newest = following(ctx, run_id=run_id)
    return Outcome(outputs=[newest], notes=notes, details={"runId": run_id})


def wait_for_job(ctx: StageContext, *, run_id: str) -> Output:
    """Poll the job's status on the cluster until it finished; then its newest checkpoint.

    A failed job is a CommandFailedError (exit 9) with the scheduler's or the job's reason; a
    job that completed without pushing a checkpoint is a RemoteError naming the repository.
    """
    from trainops.checkpoint import list_checkpoints  # lazy: loads concurrent.futures
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures
    from trainops.cluster.client import connect  # lazy: loads ssl
    from trainops.train.kube_jobs import RunState, wait_finished  # lazy: loads ssl, socketserver

    train = ctx.manifest.pipeline.spec.train
    assert train is not None  # the train stage exists only with a train section
    repository = checkpoint_repository(ctx.registries, manifest=ctx.manifest)

    def say(state: RunState | None) -> None:
        if state is None:
            ctx.note(f"run {run_id}: not in the cluster yet (waiting for the GitOps controller)")
        else:
            ctx.note(f"run {run_id}: {state.phase}" + (f" ({state.reason})" if state.reason else ""))

    with connect(ctx.cluster) as cluster:
        state = wait_finished(
            cluster,
            train=train,
            pipeline=ctx.manifest.pipeline.metadata.name,
            run_id=run_id,
            timeout=ctx.timeout,
            poll=ctx.poll,
            on_change=say,
        )
    if state.failed:
        raise CommandFailedError(
            f"run {run_id}'s job {state.namespace}/{state.name} ended {state.phase}"
            + (f": {state.reason}" if state.reason else ""),
            hint=f"`trainops train logs {run_id}` shows its pods' output",
        )
    mine = [c for c in list_checkpoints(ctx.registries, repository=repository) if c.run_id == run_id]
    if not mine:
        raise RemoteError(
            f"run {run_id}'s job {state.phase} but pushed no checkpoint to {repository.repo_url}",
            hint=f"`trainops train logs {run_id}` shows whether its checkpoint watcher could reach the registry",
        )
    ctx.note(f"run {run_id} finished; its newest checkpoint is {mine[-1].tag} (step {mine[-1].step})")
    return Output(name="checkpoint", digest=mine[-1].digest, ref=mine[-1].ref)


def wait_for_checkpoints(ctx: StageContext, *, run_id: str) -> Output:
    """Poll the checkpoint repository until the run's newest checkpoint stops changing for
    ctx.quiet seconds; RemoteError after ctx.timeout."""
    from trainops.checkpoint import list_checkpoints  # lazy: loads concurrent.futures
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures

    repository = checkpoint_repository(ctx.registries, manifest=ctx.manifest)
    deadline = time.monotonic() + ctx.timeout
    newest = None
    changed = time.monotonic()
    while True:
        mine = [c for c in list_checkpoints(ctx.registries, repository=repository) if c.run_id == run_id]
        if mine and (newest is None or mine[-1].digest != newest.digest):
            newest, changed = mine[-1], time.monotonic()
            ctx.note(f"run {run_id} pushed {newest.tag} (step {newest.step})")
        now = time.monotonic()
        if newest is not None and now - changed >= ctx.quiet:
            return Output(name="checkpoint", digest=newest.digest, ref=newest.ref)
        if now >= deadline:
            got = f"its newest is {newest.tag}" if newest else "none yet"
            raise RemoteError(
                f"timed out after {ctx.timeout:g} s waiting for run {run_id}'s checkpoints in "
                f"{repository.repo_url} ({got})",
                hint="run `trainops run` again to keep waiting: the job is not submitted twice",
            )
        log.debug("waiting for run %s in %s", run_id, repository.repo_url)
        time.sleep(min(ctx.poll, max(0.0, deadline - now)))
