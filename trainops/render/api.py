"""render_train, render_tenants, render_all, check_render: the render package's entry points.

Files of the rendered tree (relative to the GitOps path):

    train/volcano-job.yaml    scheduler volcano
    train/kueue-jobset.yaml   scheduler kueue, workload jobset
    train/kueue-job.yaml      scheduler kueue, workload job (the Service, then the Job)
    train/trainjob.yaml       scheduler kubeflow (trainops' TrainingRuntime, then the TrainJob)
    train/pytorchjob.yaml     scheduler pytorchjob (the legacy Training Operator)
    train/rayjob.yaml         scheduler ray (KubeRay)
    train/kubernetes-job.yaml scheduler kubernetes (the Service, Workload, PodGroup, then the Job)
    train/sbatch.sh           scheduler slurm (not a Kubernetes object)
    tenants/volcano-queues.yaml   spec.tenants for volcano and pytorchjob
    tenants/kueue-queues.yaml     spec.tenants for kueue, kubeflow and ray (ResourceFlavor, ClusterQueues, LocalQueues)
    cluster/volcano-hypernodes.yaml  spec.cluster.topology for volcano and pytorchjob (HyperNodes)
    cluster/kueue-topology.yaml      spec.cluster.topology for kueue (Topology, its ResourceFlavor)
    slo/prometheusrule.yaml   spec.slo.training, Kubernetes targets: the training SLOs' rules
    train/podmonitor.yaml     … and the run's PodMonitor and Grafana dashboard (trainops.slo.render)
    train/dashboard.yaml
    argocd/application.yaml   spec.gitops.argocd, Kubernetes targets: the Argo CD Application
                              that syncs the path (render_all only; trainops.render.argocd)

The local scheduler renders nothing. spec.patches are applied last, over everything a call
renders; a patch that matches nothing is an error (render_train and render_tenants leave
patches of the other half's kinds to it).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.errors import ManifestError, TrainopsError
from trainops.manifest import Manifest
from trainops.manifest.stages import TrainSpec
from trainops.render.argocd import APPLICATION_FILE, application
from trainops.render.context import RunContext, build_context
from trainops.render.env import secret_looking
from trainops.render.image import is_pinned
from trainops.render.kueue import indexed_job, jobset
from trainops.render.model import RenderCheck, Rendered, RenderedFile, SchemaProblem
from trainops.render.names import LABEL_PIPELINE, LABEL_RUN_ID
from trainops.render.patches import apply_patches
from trainops.render.pod import main_resources
from trainops.render.pytorchjob import pytorch_job
from trainops.render.ray import ray_job
from trainops.render.slurm import sbatch_script
from trainops.render.tenants import kueue_queues, uncovered, volcano_queues
from trainops.render.topology import kueue_topology, volcano_hypernodes
from trainops.render.trainjob import train_job
from trainops.render.validate import validate_objects
from trainops.render.volcano import volcano_job
from trainops.render.workload import gang_job
from trainops.render.yamlio import dump_documents
from trainops.slo.render import training_objects

TENANT_KINDS = {
    "volcano": frozenset({"Queue", "HyperNode"}),
    "kueue": frozenset({"ResourceFlavor", "ClusterQueue", "LocalQueue", "Topology"}),
}
TRAIN_KINDS = {
    "volcano": frozenset({"Job"}),
    "kueue": frozenset({"JobSet", "Job", "Service"}),
    "kubeflow": frozenset({"TrainJob", "TrainingRuntime"}),
    "pytorchjob": frozenset({"PyTorchJob"}),
    "ray": frozenset({"RayJob"}),
    "kubernetes": frozenset({"Workload", "PodGroup", "Job", "Service"}),
}
# kinds a scheduler's renderer takes spec.patches of itself (the Trainer's JobSet: RuntimePatches)
CONSUMED_KINDS = {"kubeflow": frozenset({"JobSet"})}
# what trainops.rollout renders with spec.rollout: patches of these kinds are the serving render's
SERVING_KINDS = frozenset(
    {"Rollout", "AnalysisTemplate", "Service", "HTTPRoute", "Deployment", "InferenceService"}
    | {"LeaderWorkerSet", "ServiceMonitor", "Application", "PrometheusRule", "ConfigMap"}
    | {"DisaggregatedSet", "InferencePool", "ServiceAccount", "Role", "RoleBinding", "LLMInferenceService"}
)
PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
CHECK_RUN_ID = "validate"


@dataclass
class _Part:
    """Objects of one file, before patches (or the text of the sbatch script)."""

    path: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None


@dataclass
class _Tree:
    parts: list[_Part] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    header: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # a part's own header, over `header`

    def part_headers(self) -> dict[str, str]:
        return {part.path: self.headers.get(part.path, self.header) for part in self.parts}


def _tenant_scheduler(manifest: Manifest) -> str | None:
    train = manifest.pipeline.spec.train
    scheduler = train.scheduler if train is not None else "volcano"
    queues = {"volcano": "volcano", "pytorchjob": "volcano", "kueue": "kueue", "kubeflow": "kueue", "ray": "kueue"}
    return queues.get(scheduler)


def _train_part(ctx: RunContext) -> _Part:
    train = ctx.train
    if train.scheduler == "volcano":
        return _Part("train/volcano-job.yaml", [volcano_job(ctx)])
    if train.scheduler == "kueue":
        if train.kueue is not None and train.kueue.workload == "job":
            return _Part("train/kueue-job.yaml", indexed_job(ctx))
        return _Part("train/kueue-jobset.yaml", [jobset(ctx)])
    if train.scheduler == "pytorchjob":
        return _Part("train/pytorchjob.yaml", [pytorch_job(ctx)])
    if train.scheduler == "kubernetes":
        return _Part("train/kubernetes-job.yaml", gang_job(ctx))
    if train.scheduler == "ray":
        return _Part("train/rayjob.yaml", [ray_job(ctx)])
    if train.scheduler == "kubeflow":
        return _Part("train/trainjob.yaml", train_job(ctx))

    return _Part("train/sbatch.sh", text=sbatch_script(ctx))


def _train_warnings(ctx: RunContext) -> None:
    train = ctx.train
    for text in secret_looking(train):
        ctx.warn(text)
    if train.scheduler != "slurm" and train.nodes > 1 and train.checkpoint.claim is None:
        ctx.warn(
            "train.checkpoint.claim is not set: each pod writes checkpoints to its own emptyDir and only the rank-0 "
            "pod's are pushed; set it to a ReadWriteMany PVC if every rank writes a shard"
        )
    names = [t.name for t in ctx.spec.tenants]
    queued = train.scheduler in ("volcano", "kueue", "kubeflow", "pytorchjob", "ray")
    if names and train.queue and train.queue not in names and queued:
        ctx.warn(
            f"train.queue {train.queue!r} is none of spec.tenants ({', '.join(names)}): it must exist in the cluster"
        )
    if train.scheduler in ("kueue", "ray") and train.queue in names and train.namespace:
        tenant = next(t for t in ctx.spec.tenants if t.name == train.queue)
        if train.namespace not in tenant.namespaces:
            ctx.warn(
                f"train.namespace {train.namespace} is not a namespace of tenant {tenant.name}: it has no LocalQueue"
            )


def _train_tree(manifest: Manifest, *, image: str, run_id: str, commit: str | None) -> _Tree:
    if manifest.require_train().scheduler == "local":
        build_context(manifest, image=image, run_id=run_id, commit=commit)  # the same checks of image and run id
        return _Tree()
    ctx = build_context(manifest, image=image, run_id=run_id, commit=commit)
    part = _train_part(ctx)
    _train_warnings(ctx)
    return _Tree([part], ctx.warnings, ctx.header)


def _header(manifest: Manifest, section: str) -> str:
    return (
        f"Rendered by trainops from {manifest.path.name} (pipeline {manifest.pipeline.metadata.name}, {section}).\n"
        "Do not edit: change the manifest (or its spec.patches) and render again."
    )


def _tenant_tree(manifest: Manifest) -> _Tree:
    pipeline = manifest.pipeline
    spec = pipeline.spec
    topology = _topology_tree(manifest)
    if not spec.tenants:
        return topology
    scheduler = _tenant_scheduler(manifest)
    header = _header(manifest, "spec.tenants")
    labels = dict(pipeline.metadata.labels)
    if scheduler == "volcano":
        parts = [_Part("tenants/volcano-queues.yaml", volcano_queues(spec, pipeline.metadata.name, labels))]
        return _merge(topology, _Tree(parts, [], header))
    if scheduler == "kueue":
        warnings: list[str] = []
        objects = kueue_queues(spec, pipeline.metadata.name, labels, warnings)
        train = spec.train
        if train is not None:
            requested = [*main_resources(train), "cpu", "memory"]
            warnings += uncovered(spec, list(dict.fromkeys(requested)))
        return _merge(topology, _Tree([_Part("tenants/kueue-queues.yaml", objects)], warnings, header))
    train = spec.train
    if train is not None and train.scheduler == "slurm":
        return _Tree(warnings=["spec.tenants are Kubernetes queues: with scheduler slurm they are not rendered"])
    return topology


def _topology_tree(manifest: Manifest) -> _Tree:
    """spec.cluster.topology as HyperNodes (Volcano) or a Topology and its ResourceFlavor (Kueue)."""

    cluster = manifest.pipeline.spec.cluster
    fabric = cluster.topology if cluster is not None else None
    if fabric is None:
        return _Tree()
    name, labels = manifest.pipeline.metadata.name, dict(manifest.pipeline.metadata.labels)
    header = _header(manifest, "spec.cluster.topology")
    scheduler = _tenant_scheduler(manifest)
    if scheduler == "kueue":
        return _Tree([_Part("cluster/kueue-topology.yaml", kueue_topology(fabric, name, labels))], [], header)
    if scheduler == "volcano":
        if not fabric.domains:
            note = "spec.cluster.topology has no domains: Volcano needs them as HyperNodes; none are rendered"
            return _Tree(warnings=[note])
        return _Tree([_Part("cluster/volcano-hypernodes.yaml", volcano_hypernodes(fabric, name, labels))], [], header)
    return _Tree(warnings=["spec.cluster.topology is for Volcano and Kueue: with scheduler slurm it is not rendered"])


def _merge(first: _Tree, second: _Tree) -> _Tree:
    """Two trees of different headers: each part keeps its own (see _finish)."""
    merged = _Tree([*first.parts, *second.parts], [*first.warnings, *second.warnings], second.header)
    merged.headers = {**first.part_headers(), **second.part_headers()}
    return merged


def _finish(trees: list[_Tree], manifest: Manifest, *, skip_kinds: frozenset[str]) -> Rendered:
    parts = [part for tree in trees for part in tree.parts]
    headers = {path: text for tree in trees for path, text in tree.part_headers().items()}
    objects = [obj for part in parts for obj in part.objects]
    owners = [part.path for part in parts for _ in part.objects]
    if parts:
        patches = list(enumerate(manifest.pipeline.spec.patches))
        objects = apply_patches(objects, patches, skip_kinds=skip_kinds)
    files: list[RenderedFile] = []
    for part in parts:
        if part.text is not None:
            files.append(RenderedFile(part.path, part.text))
            continue
        mine = [obj for obj, owner in zip(objects, owners, strict=True) if owner == part.path]
        files.append(RenderedFile(part.path, dump_documents(mine, header=headers[part.path])))
    warnings = [w for tree in trees for w in tree.warnings]
    return Rendered(files=files, objects=objects, sources=owners, warnings=list(dict.fromkeys(warnings)))


def render_train(manifest: Manifest, *, image: str, run_id: str, commit: str | None = None) -> Rendered:
    """The training job of the manifest's scheduler (no files for the local scheduler).

    image: pinned by digest (HOST/REPO[:TAG]@sha256:…); run_id: a DNS label; commit: the git
    commit the run is built from (an annotation and TRAINOPS_GIT_COMMIT).
    """
    tree = _train_tree(manifest, image=image, run_id=run_id, commit=commit)
    scheduler = _tenant_scheduler(manifest)
    skip = TENANT_KINDS.get(scheduler or "", frozenset()) | _serving(manifest) | _consumed(manifest)
    return _finish([tree], manifest, skip_kinds=skip)


def render_tenants(manifest: Manifest) -> Rendered:
    """spec.tenants as Volcano Queues or Kueue ClusterQueues/LocalQueues (+ ResourceFlavor)."""
    train = manifest.pipeline.spec.train
    scheduler = train.scheduler if train is not None else "volcano"
    skip = TRAIN_KINDS.get(scheduler, frozenset()) | _serving(manifest) | _consumed(manifest)
    return _finish([_tenant_tree(manifest)], manifest, skip_kinds=skip)


def render_all(manifest: Manifest, *, image: str, run_id: str, commit: str | None = None) -> Rendered:
    """render_train and render_tenants together, and the path's Argo CD Application; every
    patch must match one of their objects."""
    trees = [
        _train_tree(manifest, image=image, run_id=run_id, commit=commit),
        _tenant_tree(manifest),
        _application_tree(manifest),
        _slo_tree(manifest, image=image, run_id=run_id, commit=commit),
    ]
    return _finish(trees, manifest, skip_kinds=_serving(manifest) | _consumed(manifest))


def _slo_tree(manifest: Manifest, *, image: str, run_id: str, commit: str | None) -> _Tree:
    """spec.slo.training on a Kubernetes scheduler: the training SLOs' rules, the run's PodMonitor
    and dashboard (trainops.slo.render), beside the job they observe."""

    train = manifest.pipeline.spec.train
    slo = manifest.pipeline.spec.slo
    if train is None or train.scheduler in ("local", "slurm") or slo is None or slo.training is None:
        return _Tree()
    ctx = build_context(manifest, image=image, run_id=run_id, commit=commit)
    selector = {LABEL_PIPELINE: ctx.pipeline, LABEL_RUN_ID: run_id}
    objects = training_objects(manifest, run_id=run_id, metadata=lambda name: ctx.metadata(name, labels=ctx.labels(
        component="slo")), selector=selector)  # fmt: skip
    # the run's PodMonitor and dashboard go with its job (train cancel removes them); the rules stay
    files = {
        "PrometheusRule": "slo/prometheusrule.yaml",
        "PodMonitor": "train/podmonitor.yaml",
        "ConfigMap": "train/dashboard.yaml",
    }
    parts = [_Part(files[obj["kind"]], [obj]) for obj in objects]
    return _Tree(parts, [], _header(manifest, "spec.slo"))


def _application_tree(manifest: Manifest) -> _Tree:
    """The Argo CD Application of the training path (with spec.gitops.argocd, for the
    Kubernetes targets): it syncs every directory of the path but its own `argocd/`."""

    train = manifest.pipeline.spec.train
    if train is None or train.scheduler in ("local", "slurm"):
        return _Tree()
    warnings: list[str] = []
    app = application(
        manifest, role="train", path=manifest.pipeline.spec.gitops.path, namespace=train.namespace,
        warnings=warnings, recurse=True,
    )  # fmt: skip
    if app is None:
        return _Tree()
    return _Tree([_Part(APPLICATION_FILE, [app])], warnings, _header(manifest, "spec.gitops.argocd"))


def _consumed(manifest: Manifest) -> frozenset[str]:
    """Kinds whose spec.patches the scheduler's renderer took (not merge patches of rendered objects)."""
    train = manifest.pipeline.spec.train
    return CONSUMED_KINDS.get(train.scheduler, frozenset()) if train is not None else frozenset()


def _serving(manifest: Manifest) -> frozenset[str]:
    return SERVING_KINDS if manifest.pipeline.spec.rollout is not None else frozenset()


def placeholder_image(manifest: Manifest, *, image: str = "image", digest: str = PLACEHOLDER_DIGEST) -> str:
    """A pinned stand-in for the image the pipeline would build, for checks before any build
    (image: its last path part, such as serve-vllm; the oci:// registry's, else registry.invalid)."""
    spec = manifest.pipeline.spec
    name = manifest.pipeline.metadata.name
    host = (
        spec.registry.removeprefix("oci://").rstrip("/") if spec.registry.startswith("oci://") else "registry.invalid"
    )
    return f"{host}/{name}/{image}@{digest}"


def _bash_problems(rendered: Rendered) -> list[SchemaProblem]:
    bash = shutil.which("bash")
    if bash is None:
        return []
    out = []
    for item in rendered.files:
        if item.path.endswith(".sh"):
            proc = subprocess.run(
                [bash, "-n"], input=item.text, capture_output=True, text=True, check=False, timeout=30
            )
            if proc.returncode != 0:
                text = "; ".join(line.strip() for line in proc.stderr.splitlines() if line.strip())
                out.append(SchemaProblem(item.path, "", "", "", f"bash -n: {text}"))
    return out


def render_for_check(
    manifest: Manifest, *, image: str | None = None, run_id: str = CHECK_RUN_ID, warnings: list[str] | None = None
) -> Rendered:
    """What check_render checks: everything rendered with `image`, else train.image when it is
    pinned, else a placeholder pinned image (a tag is said in `warnings`)."""
    train = manifest.pipeline.spec.train
    if image is None:
        if train is not None and train.image and is_pinned(train.image):
            image = train.image
        else:
            if train is not None and train.image and warnings is not None:
                warnings.append(
                    f"train.image {train.image} is a tag: a submit pins it to the digest it names then; "
                    "pin it (…@sha256:…) to render the same job every time"
                )
            image = placeholder_image(manifest)
    return render_tenants(manifest) if train is None else render_all(manifest, image=image, run_id=run_id)


def check_render(
    manifest: Manifest, *, crds_dir: Path | None = None, image: str | None = None, run_id: str = CHECK_RUN_ID
) -> RenderCheck:
    """Render everything for the manifest (with a placeholder pinned image when none is given,
    and train.image when it is pinned) and check every object against its schema."""
    spec = manifest.pipeline.spec
    train: TrainSpec | None = spec.train
    scheduler = train.scheduler if train is not None else None
    if train is not None and train.scheduler == "local":
        note = "train.scheduler is local: the job runs as a subprocess, there is nothing to render for a cluster"
        return RenderCheck(manifest.env, scheduler, [], {}, [], [], note=note)
    warnings: list[str] = []
    try:
        rendered = render_for_check(manifest, image=image, run_id=run_id, warnings=warnings)
    except TrainopsError as err:  # a ManifestError names its file and line itself
        problem = SchemaProblem("" if isinstance(err, ManifestError) else manifest.path.name, "", "", "", str(err))
        return RenderCheck(manifest.env, scheduler, [], {}, [problem], warnings)
    problems = validate_objects(rendered.objects, crds_dir=crds_dir, sources=rendered.sources)
    problems += _bash_problems(rendered)
    counts = Counter(f"{obj.get('apiVersion')} {obj.get('kind')}" for obj in rendered.objects)
    note = "" if rendered.files else "nothing to render: no train section and no tenants"
    return RenderCheck(
        env=manifest.env,
        scheduler=scheduler,
        files=[f.path for f in rendered.files],
        counts=dict(sorted(counts.items())),
        problems=problems,
        warnings=warnings + rendered.warnings,
        note=note,
    )
