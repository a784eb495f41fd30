"""Everything a target needs from the manifest for one run, resolved and checked once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainops import runid
from trainops.manifest import Manifest
from trainops.manifest.pipeline import PipelineSpec
from trainops.manifest.stages import TrainSpec
from trainops.registry.reference import parse_reference
from trainops.render.env import process_env
from trainops.render.image import PinnedImage, pin_image
from trainops.render.names import ANNOTATION_COMMIT, ANNOTATION_IMAGE, check_commit, common_labels

_SCHEMES = ("oci://", "s3://", "file://")


@dataclass
class RunContext:
    manifest_name: str  # the manifest's file name, for headers
    pipeline: str
    run_id: str
    commit: str | None
    spec: PipelineSpec
    train: TrainSpec
    image: PinnedImage
    agent_image: PinnedImage
    repository: str  # the fully qualified checkpoint repository URL
    user_labels: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    env: str | None = None  # the --env overlay the manifest was loaded with
    path: Path | None = None  # the manifest file, for errors located at a line of it

    @property
    def insecure(self) -> frozenset[str]:
        """host[:port] of the registries reached over plain HTTP (spec.insecureRegistries)."""
        return frozenset(self.spec.insecure_registries)

    @property
    def namespace(self) -> str | None:
        return self.train.namespace

    def labels(self, *, component: str = "train") -> dict[str, str]:
        return common_labels(self.pipeline, run_id=self.run_id, component=component, extra=self.user_labels)

    def annotations(self) -> dict[str, str]:
        out = {ANNOTATION_IMAGE: self.image.ref}
        if self.commit:
            out[ANNOTATION_COMMIT] = self.commit
        return out

    def metadata(self, name: str, *, labels: dict[str, str] | None = None) -> dict[str, object]:
        meta: dict[str, object] = {"name": name}
        if self.namespace:
            meta["namespace"] = self.namespace
        meta["labels"] = labels if labels is not None else self.labels()
        meta["annotations"] = self.annotations()
        return meta

    def process_env(self, *, endpoint: str | None) -> list[tuple[str, str]]:
        """The training process's literal environment for this run (see render.env)."""

        return process_env(
            pipeline=self.pipeline,
            run_id=self.run_id,
            image=self.image.ref,
            digest=self.image.digest,
            ckpt_dir=self.train.checkpoint.dir,
            repository=self.repository,
            commit=self.commit,
            train=self.train,
            endpoint=endpoint,
        )

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    @property
    def header(self) -> str:
        return (
            f"Rendered by trainops from {self.manifest_name} (pipeline {self.pipeline}, run {self.run_id}).\n"
            "Do not edit: change the manifest (or its spec.patches) and render again."
        )


def checkpoint_repository(spec: PipelineSpec, pipeline: str, train: TrainSpec) -> str:
    """The manifest's checkpoint repository (checkpoint.catalog's one rule) as a URL for the pods;
    a repository without a scheme lives under spec.registry."""
    from trainops.checkpoint.catalog import declared_repository, require_repository  # lazy: loads concurrent.futures

    text, where = declared_repository(spec, pipeline=pipeline, train=train)
    if not text.startswith(_SCHEMES):
        text = f"{spec.registry.rstrip('/')}/{text.lstrip('/')}"
    if text.startswith("file://"):
        return text.rstrip("/")  # kept as written: a local path means nothing to a cluster
    return require_repository(parse_reference(text), where=where).repo_url


def build_context(manifest: Manifest, *, image: str, run_id: str, commit: str | None) -> RunContext:
    pipeline = manifest.pipeline
    spec = pipeline.spec
    train = manifest.require_train()
    pinned = pin_image(image, field="image")
    agent_text = train.checkpoint.agent_image
    agent = pin_image(agent_text, field="train.checkpoint.agentImage") if agent_text else pinned
    name = pipeline.metadata.name
    ctx = RunContext(
        manifest_name=manifest.path.name,
        pipeline=name,
        run_id=runid.check(run_id),
        commit=check_commit(commit),
        spec=spec,
        train=train,
        image=pinned,
        agent_image=agent,
        repository=checkpoint_repository(spec, name, train),
        user_labels=dict(pipeline.metadata.labels),
        env=manifest.env,
        path=manifest.path,
    )
    slurm = train.slurm
    bare_metal = train.scheduler == "slurm" and slurm is not None and slurm.runtime == "bare-metal"
    if not pinned.pullable and not bare_metal:
        ctx.warn(
            f"image {pinned.ref} is in a {pinned.ref.split(':', 1)[0]}:// registry, which a cluster cannot pull "
            "from; push it to an oci:// registry (trainops registry copy) for a cluster run"
        )
    if ctx.repository.startswith("file://") and not bare_metal:  # bare-metal nodes share the filesystem
        ctx.warn(
            f"the checkpoint repository {ctx.repository} is a local directory a cluster cannot reach; "
            "set spec.registry (or train.checkpoint.repository) to an oci:// or s3:// URL for a cluster run"
        )
    return ctx
