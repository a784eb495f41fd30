"""The local executor (the embedded default): image, training and checkpoint stages here.

The image stage is honest on every path: a pinned `train.image` is resolved to its digest;
the layer builder appends the code to `image.base`; the docker builder builds on the engine
at DOCKER_HOST. With neither an engine nor a base image, the stage says it was skipped and
why, and the training records the environment it ran in (Python version, a digest of the
installed packages) in every checkpoint's lineage instead of an image digest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.errors import CommandFailedError, InputError, NotFoundError, RemoteError
from trainops.image.pinned import training_image
from trainops.manifest import Manifest
from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.keys import run_environment
from trainops.pipeline.stage import Outcome, Output
from trainops.registry.reference import Reference

if TYPE_CHECKING:
    from trainops.train.local import LocalRunResult

DEFAULT_SOCKET = "/var/run/docker.sock"


def engine_problem() -> str | None:
    """Why no container engine can be used here, or None when one answers."""
    host = os.environ.get("DOCKER_HOST")
    if not host and not Path(DEFAULT_SOCKET).exists():
        return f"no container engine: DOCKER_HOST is unset and {DEFAULT_SOCKET} does not exist"
    from trainops.image.engine import Engine  # lazy: loads tarfile

    try:
        Engine.connect(timeout=10).close()
    except RemoteError as err:
        return err.message
    return None


def image_skip(ctx: StageContext) -> Outcome | None:
    """The skipped outcome when this machine can build no image for the manifest, else None."""
    spec = ctx.manifest.pipeline.spec
    if (spec.train is not None and spec.train.image) or spec.image is None or spec.image.builder == "layer":
        return None
    problem = engine_problem()
    if problem is None:
        return None
    env = run_environment()
    reason = (
        f"{problem}, and image.builder is docker (the layer builder needs image.base); "
        f"the local run uses this machine's Python {env.python} ({env.packages} packages, {env.digest[:19]})"
    )
    return Outcome(
        outputs=[Output(name="environment", digest=env.digest)],
        skipped=reason,
        details={"environment": env.as_json()},
        cacheable=False,
    )


def image_stage(ctx: StageContext) -> Outcome:
    """train.image pinned to its digest, or the manifest's image built and pushed."""
    from trainops.image.api import build_image  # lazy: loads tarfile, sqlite3

    train = ctx.manifest.pipeline.spec.train
    if train is not None and train.image:
        ref = training_image(ctx.manifest, ctx.registries, image=train.image)
        return Outcome(
            outputs=[Output(name="image", digest=str(ref.digest), ref=str(ref))],
            details={"pinned": train.image},
            cacheable=False,
        )
    result = build_image(ctx.manifest, push=True, insecure=ctx.insecure, log=lambda text: _log(ctx, text))
    if result.digest is None:
        raise RemoteError(f"the image build left no digest in {result.repository}", hint="check the build log")
    pinned = f"{result.repository}:{result.tags[0]}@{result.digest}"
    note = "reused (its inputs digest was in the registry)" if result.skipped else f"built with {result.builder}"
    return Outcome(
        outputs=[Output(name="image", digest=result.digest, ref=pinned)],
        notes=[note, *result.notes],
        details={"builder": result.builder, "inputsDigest": result.inputs_digest, "tags": result.tags},
    )


def _log(ctx: StageContext, text: str) -> None:
    line = text.strip()
    if line:
        ctx.note(line)


def image_of(ctx: StageContext) -> Reference | None:
    found = ctx.optional("image", "image")
    return ctx.registries.ref(found.ref) if found and found.ref else None


def train_stage(ctx: StageContext) -> Outcome:
    """train.command here with the checkpoint watcher (trainops.train.local.run_local).
    Its output is the newest checkpoint this run wrote: a run that wrote none (it resumed at
    its last step) fails, and no earlier checkpoint stands in for it."""
    from trainops.train.local import LocalRunOptions, run_local  # lazy: loads subprocess

    image = image_of(ctx)
    environment = None if image else run_environment()
    run_id = ctx.stage_run_id()
    run_options = LocalRunOptions(
        image=image,
        insecure=ctx.insecure,
        command_stdout=ctx.command_stdout,
        environment=environment,
        fresh=ctx.fresh,
    )
    result = run_local(
        ctx.manifest,
        run_id=run_id,
        options=run_options,
        on_push=lambda item: ctx.note(f"pushed {item.name} (step {item.step})"),
    )
    result.raise_for_failure(
        hint="fix it and run `trainops run` again: finished stages are cached and training resumes "
        "from its newest checkpoint"
    )
    newest = _written(ctx, result)
    notes = [f"run {run_id}: {len(result.pushed)} checkpoint(s) pushed"]
    if result.restored:
        notes.append(f"resumed from {result.restored}")
    return Outcome(
        outputs=[newest],
        notes=notes,
        details={"runId": run_id, "pushed": len(result.pushed), "restored": result.restored},
    )


def _written(ctx: StageContext, result: LocalRunResult) -> Output:
    """The newest checkpoint this stage's run wrote: pushed now, or — resumed after a
    failure — by an earlier attempt of the same run (the same inputs). Never one an older
    run wrote for other inputs, nor a killed run's left behind in the directory."""
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    floor = -1 if result.resumed_step is None else result.resumed_step
    written = [item for item in result.pushed if item.step > floor]
    if written:
        newest = max(written, key=lambda item: item.step)
        return Output(name="checkpoint", digest=newest.digest, ref=newest.ref)
    resumed = result.resumed_from
    if resumed is not None:
        try:
            found = resolve(ctx.registries, ref=ctx.registries.ref(resumed.ref).with_digest(resumed.digest))
        except NotFoundError:  # pruned meanwhile: not an output to record
            found = None
        if found is not None and found.parsed.lineage().run_id == result.run_id:
            return Output(name="checkpoint", digest=resumed.digest, ref=str(found.ref))
    where = f"it resumed from {resumed.ref} (step {floor}) and wrote nothing after it" if resumed else "it wrote none"
    raise CommandFailedError(
        f"train.command pushed no new checkpoint (run {result.run_id}): {where}, "
        "so these inputs have no trained checkpoint of their own",
        status=0,
        hint="train more steps (raise the trainer's step count, e.g. in train.env), "
        "or start fresh from step 0: trainops run --fresh",
    )


def _newest(ctx: StageContext) -> Output:
    from trainops.checkpoint import latest_checkpoint  # lazy: loads concurrent.futures
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures

    repository = checkpoint_repository(ctx.registries, manifest=ctx.manifest)
    info = latest_checkpoint(ctx.registries, repository=repository)
    if info is None:
        raise NotFoundError(
            f"training finished but {repository.repo_url} holds no checkpoint",
            hint="train.command must write checkpoints under $TRAINOPS_CKPT_DIR",
        )
    return Output(name="checkpoint", digest=info.digest, ref=info.ref)


def _train_run(ctx: StageContext) -> str | None:
    """The run that wrote the train stage's output (None without a train stage)."""
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    output = ctx.optional("train", "checkpoint")
    if output is None or output.ref is None:
        return None
    found = resolve(ctx.registries, ref=ctx.registries.ref(output.ref).with_digest(output.digest))
    return found.parsed.lineage().run_id


def checkpoint_selection(manifest: Manifest) -> str:
    """Which checkpoint the flow goes on with: eval.checkpoint, else release.source."""
    spec = manifest.pipeline.spec
    if spec.eval is not None:
        return spec.eval.checkpoint
    if spec.release is not None:
        return spec.release.source
    return "latest"


def checkpoint_stage(ctx: StageContext) -> Outcome:
    """The checkpoint the next stages take: the newest the training pushed, the best by the
    retention metric, or a reference, pinned to its digest."""
    from trainops.checkpoint import list_checkpoints  # lazy: loads concurrent.futures
    from trainops.checkpoint.catalog import checkpoint_repository  # lazy: loads concurrent.futures
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    choice = checkpoint_selection(ctx.manifest)
    if choice == "latest":
        found = ctx.optional("train", "checkpoint")
        output = found or _newest(ctx)
        return Outcome(outputs=[Output("checkpoint", output.digest, output.ref)], details={"select": choice})
    if choice == "best":
        train = ctx.manifest.pipeline.spec.train
        metric = train.checkpoint.keep.metric if train else None
        if train is None or not metric:
            raise InputError("checkpoint best needs train.checkpoint.keep.metric", hint="set it, or use latest")
        repository = checkpoint_repository(ctx.registries, manifest=ctx.manifest)
        run = _train_run(ctx)  # the best of what this flow's training wrote, not of another run's
        ranked = [
            c
            for c in list_checkpoints(ctx.registries, repository=repository)
            if metric in c.metrics and (run is None or c.run_id == run)
        ]
        if not ranked:
            of = f" of run {run}" if run else ""
            raise NotFoundError(f"no checkpoint{of} in {repository.repo_url} reports {metric}")
        sign = 1 if train.checkpoint.keep.mode == "min" else -1
        best = min(ranked, key=lambda c: (sign * c.metrics[metric], -(c.step or 0)))
        return Outcome(outputs=[Output("checkpoint", best.digest, best.ref)], details={"select": f"best {metric}"})
    resolved = resolve(ctx.registries, ref=ctx.registries.ref(choice))
    return Outcome(
        outputs=[Output("checkpoint", resolved.manifest.digest, str(resolved.ref))], details={"select": choice}
    )
