"""What a manifest will do: its stages, what each consumes and produces, and where it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainops.manifest import Manifest, PipelineSpec
from trainops.manifest.serving import RolloutSpec
from trainops.manifest.stages import TrainSpec


@dataclass(frozen=True)
class StagePlan:
    name: str
    consumes: list[str]
    produces: list[str]
    runs_on: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    pipeline: str
    manifest: str
    env: str | None
    registry: str
    gitops: str
    stages: list[StagePlan]


def _train_runs_on(train: TrainSpec) -> str:
    gpus = train.gpus_per_node
    shape = f"{train.nodes} node{'s' if train.nodes != 1 else ''} × {gpus} GPU{'s' if gpus != 1 else ''}"
    queue = f" queue {train.queue}" if train.queue else ""
    where = {
        "volcano": f"Volcano Job{queue}",
        "kueue": f"Kueue {train.kueue.workload if train.kueue else 'jobset'}{queue}",
        "kubeflow": f"Kubeflow TrainJob{queue}",
        "pytorchjob": f"Kubeflow PyTorchJob (legacy){queue}",
        "slurm": f"Slurm sbatch{' partition ' + train.queue if train.queue else ''}",
        "local": "local subprocess",
    }[train.scheduler]
    return f"{where}, {shape}"


def _retention(train: TrainSpec) -> str:
    keep = train.checkpoint.keep
    text = f"keep last {keep.last}"
    if keep.best and keep.metric:
        text += f" + best {keep.best} by {keep.mode} {keep.metric}"
    return text


def _rollout_runs_on(rollout: RolloutSpec) -> str:
    traffic = {
        "argo-rollouts": "Argo Rollouts",
        "gateway-api": "Gateway API HTTPRoute",
        "kserve": "KServe InferenceService",
    }[rollout.traffic]
    steps = ""
    if rollout.canary:
        steps = ", canary " + " → ".join(f"{s.weight}%" for s in rollout.canary.steps)
    ab = ", A/B by header" if rollout.ab_test else ""
    return f"{rollout.engine} × {rollout.replicas} behind {traffic}{steps}{ab}"


def plan_pipeline(*, manifest: Manifest) -> Plan:
    """The stages the manifest defines, in flow order, each with its inputs and outputs."""
    pipeline = manifest.pipeline
    spec, name = pipeline.spec, pipeline.metadata.name
    gitops = f"{spec.gitops.repo} ({spec.gitops.branch}:{spec.gitops.path})"
    image_stage, image_ref = _image_stage(spec, name)
    train_stage, checkpoints = _train_stage(spec, name, image_ref)
    release_stage, model = _release_stage(spec, name, checkpoints)
    planned = [
        image_stage,
        train_stage,
        _eval_stage(spec, checkpoints),
        release_stage,
        _rollout_stage(spec, model, gitops),
    ]
    return Plan(
        pipeline=name,
        manifest=str(manifest.path),
        env=manifest.env,
        registry=spec.registry,
        gitops=gitops,
        stages=[stage for stage in planned if stage is not None],
    )


def _image_stage(spec: PipelineSpec, name: str) -> tuple[StagePlan | None, str | None]:
    """The image stage (none when train.image pins one) and the image the training runs."""
    image_ref = spec.train.image if spec.train and spec.train.image else None
    if spec.image is None or image_ref is not None:
        return None, image_ref
    image = spec.image
    image_ref = spec.repository(name, "image", image.repository)
    base = image.base or f"template {image.template} default base"
    stage = StagePlan(
        name="image",
        consumes=[f"context {image.context}", f"base {base}"],
        produces=[f"{image_ref}:<commit>, :<inputs-digest>"],
        runs_on="Docker API engine (DOCKER_HOST)" if image.builder == "docker" else "layer builder (no engine)",
        details={"template": image.template, "builder": image.builder},
    )
    return stage, image_ref


def _train_stage(spec: PipelineSpec, name: str, image_ref: str | None) -> tuple[StagePlan | None, str | None]:
    """The train stage and the checkpoint repository it fills."""
    if spec.train is None:
        return None, None
    train = spec.train
    checkpoints = spec.repository(name, "checkpoints", train.checkpoint.repository)
    consumes = [f"image {image_ref}"] + [f"dataset {d.name} {d.ref}" for d in train.datasets]
    if train.checkpoint.resume != "none":
        consumes.append(f"resume {train.checkpoint.resume} checkpoint")
    stage = StagePlan(
        name="train",
        consumes=consumes,
        produces=[f"checkpoints {checkpoints} ({_retention(train)})"],
        runs_on=_train_runs_on(train),
        details={
            "scheduler": train.scheduler,
            "nodes": train.nodes,
            "gpusPerNode": train.gpus_per_node,
            "maxRetry": train.fault_tolerance.max_retry,
        },
    )
    return stage, checkpoints


def _eval_stage(spec: PipelineSpec, checkpoints: str | None) -> StagePlan | None:
    if spec.eval is None:
        return None
    ev = spec.eval
    source = ev.checkpoint if ev.checkpoint not in ("latest", "best") else f"{ev.checkpoint} of {checkpoints}"
    return StagePlan(
        name="eval",
        consumes=[f"checkpoint {source}"],
        produces=[f"eval report in {checkpoints or ev.checkpoint} (a referrer: its subject is the checkpoint)"],
        runs_on="same place as train" if spec.train else "local subprocess",
        details={"gates": [f"{g.metric} {g.op} {g.value:g}" for g in ev.gates]},
    )


def _release_stage(spec: PipelineSpec, name: str, checkpoints: str | None) -> tuple[StagePlan | None, str | None]:
    """The release stage and the model repository it publishes to."""
    if spec.release is None:
        return None, None
    rel = spec.release
    model = spec.repository(name, "model", rel.repository)
    source = rel.source if rel.source not in ("latest", "best") else f"{rel.source} of {checkpoints}"
    gated = " that passed every gate" if rel.require_gates and spec.eval and spec.eval.gates else ""
    stage = StagePlan(
        name="release",
        consumes=[f"checkpoint {source}{gated}"],
        produces=[f"model {model}:{rel.tag}"],
        runs_on="trainops (registry, no compute)",
        details={"tag": rel.tag, "requireGates": rel.require_gates},
    )
    return stage, model


def _rollout_stage(spec: PipelineSpec, model: str | None, gitops: str) -> StagePlan | None:
    if spec.rollout is None:
        return None
    ro = spec.rollout
    return StagePlan(
        name="rollout",
        consumes=[f"model {ro.model or model}"],
        produces=[f"serving manifests → {gitops}"],
        runs_on=_rollout_runs_on(ro),
        details={"engine": ro.engine, "traffic": ro.traffic},
    )
