"""The serving tree of a state: every object of rollout.engine × rollout.traffic, the state file,
and the Argo CD Application that syncs the tree.

Files (relative to the rollout's GitOps path, `<gitops.path>-serve` unless rollout.gitopsPath):

    <kind>.yaml               the objects of each kind (rollout.yaml, service.yaml, httproute.yaml, …)
    trainops-rollout.json     the state: stable, canary, step (see trainops.rollout.state)
    argocd/application.yaml   with spec.gitops.argocd: the Application (not applied by itself:
                              Argo CD reads only the top directory's *.yaml)

spec.patches whose target kind is rendered here are applied last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainops.manifest import Manifest
from trainops.render.argocd import APPLICATION_FILE
from trainops.render.argocd import application as path_application
from trainops.render.model import RenderedFile, SchemaProblem
from trainops.render.patches import apply_patches
from trainops.render.validate import validate_objects
from trainops.render.yamlio import dump_documents
from trainops.rollout.context import ServeContext, serve_context
from trainops.rollout.disagg import check_pairs
from trainops.rollout.state import STATE_FILE, RolloutState
from trainops.rollout.traffic import traffic_objects
from trainops.slo.render import serving_objects, serving_rule_file_groups, training_rule_file_groups


@dataclass(frozen=True)
class ServingTree:
    """A rendered serving tree: files by path, the Kubernetes objects in them, and warnings."""

    path: str  # the directory in the GitOps repo
    files: list[RenderedFile]
    objects: list[dict[str, Any]]
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def contents(self) -> dict[str, str]:
        return {item.path: item.text for item in self.files}


def serving_path(manifest: Manifest) -> str:
    spec = manifest.pipeline.spec
    rollout = spec.rollout
    if rollout is not None and rollout.gitops_path:
        return rollout.gitops_path
    return f"{spec.gitops.path.rstrip('/')}-serve"


def application(ctx: ServeContext, path: str) -> dict[str, Any] | None:
    """The Argo CD Application of this service and environment (spec.gitops.argocd)."""

    ignore = None
    if ctx.rollout.traffic == "argo-rollouts" and ctx.rollout.gateway is not None:
        # the Gateway API plugin of Argo Rollouts owns the route's weights and header matches
        ignore = [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "jsonPointers": ["/spec/rules"]}]
    return path_application(
        ctx.manifest, role="serve", path=path, labels=ctx.labels(), namespace=ctx.namespace,
        warnings=ctx.warnings, ignore=ignore,
    )  # fmt: skip


def _header(ctx: ServeContext, state: RolloutState) -> str:
    stable = state.stable.version if state.stable else "none"
    canary = f", canary {state.canary.version} at step {state.step}" if state.canary else ""
    return (
        f"Rendered by trainops from {ctx.manifest.path.name} (pipeline {ctx.pipeline}, spec.rollout): "
        f"stable {stable}{canary}.\nDo not edit: change the manifest, or run `trainops rollout …`."
    )


def build_tree(ctx: ServeContext, state: RolloutState) -> ServingTree:
    """Every file of the serving tree of `state`."""
    path = serving_path(ctx.manifest)
    objects = traffic_objects(ctx, state)
    objects += serving_objects(ctx.manifest, name=ctx.name, metadata=ctx.metadata, labels=ctx.labels())
    kinds = {obj["kind"] for obj in objects}
    patches = [(i, p) for i, p in enumerate(ctx.manifest.pipeline.spec.patches) if p.target.kind in kinds]
    objects = apply_patches(objects, patches)
    if ctx.rollout.disaggregation is not None:
        check_pairs(ctx, objects)  # after the patches: what is committed is what is checked
    header = _header(ctx, state)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_file.setdefault(f"{obj['kind'].lower()}.yaml", []).append(obj)
    files = [RenderedFile(name, dump_documents(items, header=header)) for name, items in sorted(by_file.items())]
    sources = [name for name, items in sorted(by_file.items()) for _ in items]
    flat = [obj for _, items in sorted(by_file.items()) for obj in items]
    app = application(ctx, path)
    if app is not None:
        files.append(RenderedFile(APPLICATION_FILE, dump_documents([app], header=header)))
        flat.append(app)
        sources.append(APPLICATION_FILE)
    files.append(RenderedFile(STATE_FILE, state.text()))
    return ServingTree(path, sorted(files, key=lambda f: f.path), flat, sources, list(ctx.warnings))


def check_tree(tree: ServingTree) -> list[SchemaProblem]:
    """Every object of the tree checked strictly against its CRD or trainops' core schema."""
    return validate_objects(tree.objects, sources=tree.sources)


def rule_file_of(manifest: Manifest) -> dict[str, Any]:
    """Every SLO's rule group of the manifest as one Prometheus rule file (`trainops slo rules`)."""
    groups = training_rule_file_groups(manifest)
    if manifest.pipeline.spec.rollout is not None:
        groups = serving_rule_file_groups(manifest, serve_context(manifest).name) + groups
    return {"groups": groups}
