"""`trainops eval render` and `eval submit`: the eval as a Kubernetes Job (see
trainops.render.evaljob), validated strictly like the training targets, printed or
committed to `<spec.gitops.path>-eval` in the GitOps repository.

The checkpoint is resolved to its digest and the image pinned when rendering: eval.image,
else the training image (train.image, else the one built for HEAD, as `train render`
finds it), else --image. Committing replaces `<path>-eval` as a whole (the previous eval Job leaves
with it). It sits beside `<path>`, not in it, because `train submit` replaces `<path>` as a
whole (serving lives in `<path>-serve` for the same reason). With spec.gitops.argocd the
path also holds `argocd/application.yaml`, the Argo CD Application that syncs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainops import runid
from trainops.errors import InputError
from trainops.eval.run import eval_spec
from trainops.eval.select import resolve_checkpoint
from trainops.gitops import write_tree
from trainops.gitops.target import gitops_url
from trainops.image.pinned import training_image
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.reference import Reference
from trainops.render.argocd import APPLICATION_FILE, application
from trainops.render.image import cluster_image, pin_image
from trainops.render.model import Rendered, RenderedFile
from trainops.render.patches import apply_patches
from trainops.render.validate import validate_objects
from trainops.render.yamlio import dump_documents
from trainops.serialize import HIDDEN

EVAL_DIR = "eval"


@dataclass(frozen=True)
class EvalRender:
    rendered: Rendered = field(metadata=HIDDEN)
    checkpoint: Reference  # pinned by digest
    image: str
    run_id: str
    data_properties: ClassVar[tuple[str, ...]] = ("files",)

    @property
    def files(self) -> dict[str, str]:
        """The rendered files: path → content."""
        return {item.path: item.text for item in self.rendered.files}

    def text(self) -> str:
        parts = []
        for item in self.rendered.files:
            body = item.text if item.text.endswith("\n") else item.text + "\n"
            parts.append(f"# file: {EVAL_DIR}/{item.path}\n{body}")
        return "---\n".join(parts)


@dataclass(frozen=True)
class EvalSubmitResult:
    repo: str
    branch: str
    path: str
    commit: str | None
    changed: bool
    files: list[str]
    checkpoint: Reference  # pinned by digest
    image: str
    run_id: str


def _image(manifest: Manifest, registries: Registries, image: str | None) -> str:
    text = image or eval_spec(manifest).image
    return cluster_image(training_image(manifest, registries, image=text))


def render_eval(
    *, manifest: Manifest, registries: Registries, checkpoint: str | None, run_id: str, image: str | None = None
) -> EvalRender:
    """The eval Job (and its manifest ConfigMap) for one checkpoint, pinned and validated."""
    from trainops.render.evaljob import EvalJobInput, eval_objects  # lazy: loads ssl, socketserver

    spec = eval_spec(manifest)
    pipeline = manifest.pipeline
    train = manifest.require_train()  # the eval Job runs where training runs
    if train.scheduler in ("local", "slurm"):
        raise InputError(
            f"train.scheduler is {train.scheduler}: there is no Kubernetes cluster to render an eval Job for",
            hint="run `trainops eval run` where the checkpoint can be pulled (on Slurm: in a job step)",
        )
    found = resolve_checkpoint(registries, manifest=manifest, which=checkpoint or spec.checkpoint)
    pinned = pin_image(_image(manifest, registries, image), field="image")
    job = EvalJobInput(
        pipeline=pipeline.metadata.name,
        run_id=runid.check(run_id),
        env=manifest.env,
        manifest_text=manifest.path.read_text(encoding="utf-8"),
        checkpoint=str(found.ref),
        image=pinned,
        spec=pipeline.spec,
        train=train,
        eval=spec,
        user_labels=dict(pipeline.metadata.labels),
    )
    pairs = eval_objects(job)
    patches = list(enumerate(pipeline.spec.patches))
    objects = apply_patches([obj for _, obj in pairs], patches, skip_kinds=frozenset(p.target.kind for _, p in patches))
    sources = [path for path, _ in pairs]
    problems = validate_objects(objects, sources=sources)
    if problems:
        first = problems[0]
        raise InputError(
            f"the rendered eval Job is invalid: {first.file} {first.kind} {first.path}: {first.message}",
            hint="this is a bug in trainops unless spec.patches caused it",
        )
    header = (
        f"Rendered by trainops from {manifest.path.name} (pipeline {job.pipeline}, eval {job.run_id}).\n"
        "Do not edit: change the manifest (or its spec.patches) and render again."
    )
    files = [
        RenderedFile(path.removeprefix(f"{EVAL_DIR}/"), dump_documents([obj], header=header))
        for (path, _), obj in zip(pairs, objects, strict=True)
    ]
    warnings: list[str] = []
    app = _application(manifest, namespace=train.namespace, warnings=warnings)
    if app is not None:
        files.append(RenderedFile(APPLICATION_FILE, dump_documents([app], header=header)))
        objects, sources = [*objects, app], [*sources, APPLICATION_FILE]
    if found.ref.scheme == "file":
        warnings.append(f"the checkpoint {found.ref} is in a local directory a cluster cannot reach")
    rendered = Rendered(files=files, objects=objects, sources=sources, warnings=warnings)
    return EvalRender(rendered=rendered, checkpoint=found.ref, image=pinned.ref, run_id=job.run_id)


def _application(manifest: Manifest, *, namespace: str | None, warnings: list[str]) -> dict[str, Any] | None:
    """With spec.gitops.argocd, the Argo CD Application of `<path>-eval`: it syncs the path's
    top-level YAML (the Job and its ConfigMap), not its own `argocd/` directory."""

    path = f"{manifest.pipeline.spec.gitops.path.rstrip('/')}-{EVAL_DIR}"
    return application(manifest, role="eval", path=path, namespace=namespace, warnings=warnings)


def submit_eval(
    *, manifest: Manifest, registries: Registries, checkpoint: str | None, run_id: str, image: str | None = None
) -> EvalSubmitResult:
    """Commit the eval Job to `<spec.gitops.path>-eval` with trailers and push it."""

    made = render_eval(manifest=manifest, registries=registries, checkpoint=checkpoint, run_id=run_id, image=image)
    gitops = manifest.pipeline.spec.gitops
    repo, create = gitops_url(manifest)
    name = manifest.pipeline.metadata.name
    digest = made.checkpoint.digest
    if digest is None:
        raise InputError(
            f"the eval checkpoint {made.checkpoint} is not pinned by digest", hint="this is a bug in trainops"
        )
    result = write_tree(
        repo=repo,
        branch=gitops.branch,
        path=f"{gitops.path.rstrip('/')}-{EVAL_DIR}",
        files={item.path: item.text for item in made.rendered.files},
        message=f"eval {name}: {str(made.checkpoint.with_digest(None)).rsplit('/', 1)[-1]} ({made.run_id})",
        trailers={
            "Trainops-Pipeline": name,
            "Trainops-Run": made.run_id,
            "Trainops-Image": made.image,
            "Trainops-Artifact": digest,
        },
        create=create,
    )
    return EvalSubmitResult(
        repo=result.repo,
        branch=result.branch,
        path=result.path,
        commit=result.commit,
        changed=result.changed,
        files=result.files,
        checkpoint=made.checkpoint,
        image=made.image,
        run_id=made.run_id,
    )
