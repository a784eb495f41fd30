"""The eval, release and rollout stages: thin adapters over trainops.eval,
trainops.release and trainops.rollout, the same under every executor."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from trainops.errors import InputError
from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.stage import Outcome, Output
from trainops.rollout.resolve import resolve_release

PROVIDERS = {"eval": "trainops.eval", "release": "trainops.release", "rollout": "trainops.rollout"}


def missing_provider(stage: str) -> str | None:
    """The module a stage needs that this installation lacks, or None."""
    module = PROVIDERS.get(stage)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return module


def _unavailable(stage: str) -> InputError:
    return InputError(
        f"stage {stage} needs {PROVIDERS[stage]}, which this trainops does not have yet",
        hint=f"run the stages before it (trainops run --to {_before(stage)})",
    )


def _before(stage: str) -> str:
    return {"eval": "checkpoint", "release": "eval", "rollout": "release"}[stage]


def _provider(stage: str) -> Any:
    if missing_provider(stage) is not None:
        raise _unavailable(stage)
    return importlib.import_module(PROVIDERS[stage])


def eval_stage(ctx: StageContext) -> Outcome:
    """run_eval on the checkpoint the checkpoint stage chose; a failed gate fails the stage
    (exit 8) after the report is pushed, and is not recorded: the next run evaluates again."""
    evaluate = _provider("eval")
    checkpoint = ctx.input("checkpoint", "checkpoint")
    image = ctx.optional("image", "image")
    result = evaluate.run_eval(
        manifest=ctx.manifest,
        checkpoint=checkpoint.ref,
        registries=ctx.registries,
        image=image.ref if image else None,
        command_stdout=ctx.command_stdout,
    )
    gates = [f"{g.metric} {g.op} {g.value:g}: {g.actual:g} {'ok' if g.passed else 'FAILED'}" for g in result.gates]
    for line in gates:
        ctx.note(line)
    evaluate.require_passed(result)
    return Outcome(
        outputs=[Output("report", str(result.report.digest), str(result.report))],
        notes=gates,
        details={"metrics": result.metrics, "passed": result.passed, "checkpoint": result.checkpoint},
    )


def release_stage(ctx: StageContext) -> Outcome:
    """create_release of the checkpoint the flow evaluated (release.source when there is no eval)."""
    release = _provider("release")
    checkpoint = ctx.optional("checkpoint", "checkpoint") if ctx.optional("eval", "report") else None
    result = release.create_release(
        manifest=ctx.manifest,
        registries=ctx.registries,
        checkpoint=checkpoint.ref if checkpoint else None,
        command_stdout=ctx.command_stdout,
    )
    note = "released" if result.created else "the release tag already held these files"
    return Outcome(
        outputs=[Output("model", result.digest, result.ref)],
        notes=[f"{note}: {result.version}"],
        details={"version": result.version, "checkpoint": result.checkpoint, "eval": result.eval},
    )


def _taken_off(ctx: StageContext) -> tuple[str, Any]:
    """The release the rollout stage serves, pinned, and the GitOps history's word on it
    (serve.Abandoned when it was rolled back or aborted and not served since, else None)."""

    serve = _provider("rollout")
    model = ctx.optional("release", "model")
    rollout = ctx.manifest.pipeline.spec.rollout
    text = model.ref if model else (rollout.model if rollout else None)
    if not text:
        raise InputError("stage rollout has no model", hint="add a release stage or set rollout.model")
    pinned = resolve_release(ctx.registries, text)
    return pinned, serve.abandoned(ctx.manifest, release=pinned)


def rollout_held(ctx: StageContext) -> str | None:
    """Why the rollout stage would leave its release alone (what `--dry-run` says), or None."""
    if missing_provider("rollout") is not None:
        return None
    _, taken_off = _taken_off(ctx)
    return taken_off.refusal() if taken_off is not None and ctx.force_reason is None else None


def rollout_stage(ctx: StageContext) -> Outcome:
    """start_rollout of the released model (rollout.model without a release stage): the first
    canary step as a GitOps commit. Promotion stays with `trainops rollout promote`. A
    release the GitOps history shows rolled back or aborted is left alone (the stage is
    skipped, saying why) unless the run was forced with a reason, which the commit records."""
    serve = _provider("rollout")
    pinned, taken_off = _taken_off(ctx)
    if taken_off is not None and ctx.force_reason is None:
        return Outcome(outputs=[], skipped=taken_off.refusal(), cacheable=False)
    body = [taken_off.forced(ctx.force_reason)] if taken_off is not None and ctx.force_reason else None
    result = serve.start_rollout(ctx.manifest, release=pinned, image=ctx.serve_image, insecure=ctx.insecure, body=body)
    commit = str(result.commit or "")
    ctx.note(f"GitOps commit {commit[:12]}: {result.step} ({result.weight}% on the canary)")
    return Outcome(
        outputs=[Output("gitops-commit", f"git:{commit}")],
        notes=[f"commit {commit[:12]} {result.step}", *result.warnings],
        details={"commit": commit, "weight": result.weight, "step": result.step, "path": result.path},
    )
