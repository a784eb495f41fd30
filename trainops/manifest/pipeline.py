"""The top of trainops.yaml: the Pipeline document, its spec, GitOps target, tenants and patches."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from trainops.manifest.cluster import ClusterSpec
from trainops.manifest.common import GitURL, Name, Quantity, RegistryURL, RelativePath, StrictModel
from trainops.manifest.serving import RolloutSpec
from trainops.manifest.slo import SloSpec
from trainops.manifest.stages import EvalSpec, ImageSpec, ReleaseSpec, TrainSpec

API_VERSION = "trainops.dev/v1alpha1"
KIND = "Pipeline"
DEFAULT_REGISTRY = "file://.trainops/registry"
DEFAULT_GITOPS_REPO = "file://.trainops/gitops.git"


class Metadata(StrictModel):
    name: Name = Field(description="Pipeline name; names repositories and rendered objects.")
    description: str | None = None
    owner: str | None = Field(None, description="Team or person responsible.")
    labels: dict[str, str] = Field(default_factory=dict)


class ArgoCD(StrictModel):
    """The Argo CD Application that syncs the GitOps path to a cluster."""

    namespace: Name = "argocd"
    project: str = "default"
    destination_server: str = "https://kubernetes.default.svc"
    destination_namespace: Name | None = None
    automated: bool = True
    prune: bool = True
    self_heal: bool = True


class GitOps(StrictModel):
    repo: GitURL = Field(DEFAULT_GITOPS_REPO, description="The GitOps repository trainops commits to.")
    branch: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]+$")] = "main"
    path: RelativePath = Field("clusters/default", description="Directory of this pipeline's objects.")
    argocd: ArgoCD | None = None


class TenantQuota(StrictModel):
    """A resource's quota for a tenant: guarantee ≤ deserved ≤ capability."""

    capability: int | Quantity | None = Field(None, description="Hard ceiling.")
    deserved: int | Quantity | None = Field(None, description="Fair share when the cluster is full.")
    guarantee: int | Quantity | None = Field(None, description="Reserved, never reclaimed.")

    @model_validator(mode="after")
    def _ordered(self) -> TenantQuota:
        values = [self.guarantee, self.deserved, self.capability]
        numbers = [v for v in values if isinstance(v, int)]
        if len(numbers) == len([v for v in values if v is not None]) and numbers != sorted(numbers):
            raise ValueError("quota must satisfy guarantee ≤ deserved ≤ capability")
        return self


class Tenant(StrictModel):
    """A team sharing the cluster: a Volcano Queue or a Kueue ClusterQueue + LocalQueues."""

    name: Name
    namespaces: list[Name] = Field(default_factory=list)
    gpus: TenantQuota | None = None
    cpu: TenantQuota | None = None
    memory: TenantQuota | None = None
    weight: int = Field(1, ge=1)
    reclaimable: bool = True
    cohort: str | None = Field(None, description="Kueue cohort that lends and borrows quota.")
    flavor: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        max_length=253,
        description="Kueue ResourceFlavor the quota is in (one the cluster defines); "
        "default: trainops renders default-flavor, which matches every node.",
    )


class PatchTarget(StrictModel):
    kind: str = Field(min_length=1)
    name: str | None = None


class Patch(StrictModel):
    """A JSON merge patch (RFC 7386) applied to rendered objects of a kind."""

    target: PatchTarget
    merge: dict[str, Any]


class PipelineSpec(StrictModel):
    registry: RegistryURL = DEFAULT_REGISTRY
    insecure_registries: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.-]+(:[0-9]+)?$")]] = Field(
        default_factory=list, description="host[:port] of registries reached over plain HTTP."
    )
    gitops: GitOps = Field(default_factory=GitOps)
    image: ImageSpec | None = None
    train: TrainSpec | None = None
    eval: EvalSpec | None = None
    release: ReleaseSpec | None = None
    rollout: RolloutSpec | None = None
    slo: SloSpec | None = Field(
        None, description="Service levels of the served models and of training: measured, alerted, gating promotion."
    )
    tenants: list[Tenant] = Field(default_factory=list)
    cluster: ClusterSpec | None = Field(None, description="The cluster's network topology, declared once.")
    patches: list[Patch] = Field(default_factory=list)

    def repository(self, pipeline: str, kind: str, override: str | None = None) -> str:
        """The repository a stage writes to: the manifest's override, else <registry>/<pipeline>/<kind>
        (kind: image, checkpoints, model; eval reports live beside their checkpoint)."""
        return override or f"{self.registry.rstrip('/')}/{pipeline}/{kind}"

    @model_validator(mode="after")
    def _stages_connect(self) -> PipelineSpec:
        local = self.train is not None and self.train.scheduler == "local"  # runs here, in no image
        if self.train is not None and not local and self.train.image is None and self.image is None:
            raise ValueError("train needs an image: add an image section or set train.image")
        if self.eval is not None and self.train is None and self.eval.checkpoint in ("latest", "best"):
            raise ValueError("eval has no train stage to take a checkpoint from: set eval.checkpoint to a reference")
        if self.release is not None and self.train is None and self.release.source in ("latest", "best"):
            raise ValueError("release has no train stage: set release.source to a checkpoint reference")
        if self.release is not None and self.release.source == "best" and self.train is not None:
            keep = self.train.checkpoint.keep
            if not keep.metric:
                raise ValueError("release.source best needs train.checkpoint.keep.metric to rank checkpoints")
        if self.rollout is not None and self.release is None and self.rollout.model is None:
            raise ValueError("rollout has nothing to serve: add a release section or set rollout.model")
        names = [t.name for t in self.tenants]
        if len(set(names)) != len(names):
            raise ValueError("tenant names must be unique")
        self._topology_fits()
        return self

    def _topology_fits(self) -> None:
        """train.topology within spec.cluster.topology: a tier it has, a level that is one of its labels."""
        wanted = self.train.topology if self.train is not None else None
        fabric = self.cluster.topology if self.cluster is not None else None
        if wanted is None or fabric is None:
            return
        tiers = len(fabric.tiers)
        if wanted.highest_tier_allowed is not None and not 1 <= wanted.highest_tier_allowed <= tiers:
            top = fabric.tiers[-1].name
            raise ValueError(
                f"train.topology.highestTierAllowed {wanted.highest_tier_allowed} is not a tier of "
                f"cluster.topology (1 to {tiers}, {top} the highest)"
            )
        labels = [t.node_label for t in fabric.tiers] + ["kubernetes.io/hostname"]
        if wanted.level is not None and wanted.level not in labels:
            raise ValueError(
                f"train.topology.level {wanted.level} is not a node label of cluster.topology.tiers "
                f"({', '.join(labels)})"
            )


EnvironmentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")]


class EnvironmentOverlay(StrictModel):
    """Values merged over spec for one environment: mappings merge, lists replace, null removes."""

    registry: Any = None
    insecure_registries: Any = None
    gitops: Any = None
    image: Any = None
    train: Any = None
    eval: Any = None
    release: Any = None
    rollout: Any = None
    slo: Any = None
    tenants: Any = None
    cluster: Any = None
    patches: Any = None


class Pipeline(StrictModel):
    """A trainops.yaml document."""

    api_version: Literal["trainops.dev/v1alpha1"] = Field(description="Always trainops.dev/v1alpha1.")
    kind: Literal["Pipeline"]
    metadata: Metadata
    spec: PipelineSpec
    environments: dict[EnvironmentName, EnvironmentOverlay] = Field(
        default_factory=dict, description="Overlays by environment name, chosen with --env."
    )
