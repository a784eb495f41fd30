"""Models of the build, train, eval and release stages of trainops.yaml."""

from __future__ import annotations

import string
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from trainops.manifest.common import (
    AbsolutePath,
    Command,
    CompareOp,
    Duration,
    EnvName,
    ImageRef,
    Name,
    Quantity,
    StrictModel,
)
from trainops.manifest.faults import FaultPolicy

ImageTemplate = Literal["train-pytorch", "serve-vllm", "serve-sglang"]
TemplateParam = str | int | float | bool


class BuildSecret(StrictModel):
    """A secret the build needs; it reaches the build as a secret mount, never the image."""

    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")] = Field(
        description="Secret id the Dockerfile mounts (RUN --mount=type=secret,id=…)."
    )
    env: EnvName | None = Field(None, description="Take the value from this environment variable.")
    file: str | None = Field(None, description="Take the value from this file.")

    @model_validator(mode="after")
    def _one_source(self) -> BuildSecret:
        if (self.env is None) == (self.file is None):
            raise ValueError("set exactly one of env or file as the source of the secret")
        return self


class ImageSpec(StrictModel):
    """How an image is built: a standard template rendered with params, and a builder."""

    template: ImageTemplate = Field("train-pytorch", description="Standard image template.")
    dockerfile: str | None = Field(
        None,
        min_length=1,
        description="A Dockerfile of your own, relative to the manifest's directory, built instead of the "
        "template (docker builder; context at the build's root, buildArgs and secrets as for templates).",
    )
    builder: Literal["docker", "layer"] = Field(
        "docker",
        description="docker: any Docker-API engine; layer: append the code as one layer, no engine.",
    )
    base: ImageRef | None = Field(None, description="Base image; required by the layer builder.")
    context: str = Field(".", description="Build context, relative to the manifest's directory.")
    include: list[str] = Field(default_factory=list, description="Globs of context files to include.")
    exclude: list[str] = Field(default_factory=list, description="Globs of context files to leave out.")
    build_args: dict[EnvName, str] = Field(default_factory=dict, description="Non-secret build arguments.")
    secrets: list[BuildSecret] = Field(default_factory=list, description="Build secrets (never in the image).")
    params: dict[str, TemplateParam] = Field(
        default_factory=dict, description="Template values (torchVersion, cudaVersion, ncclVersion, …)."
    )
    repository: str | None = Field(
        None, description="Repository the image is pushed to; default: <registry>/<name>/image."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra OCI labels.")
    platform: str = Field("linux/amd64", pattern=r"^[a-z0-9]+/[a-z0-9]+(/[a-z0-9]+)?$")

    @model_validator(mode="after")
    def _layer_needs_base(self) -> ImageSpec:
        if self.builder == "layer" and self.base is None:
            raise ValueError("the layer builder appends to a base image: set base")
        if self.builder == "layer" and self.dockerfile is not None:
            raise ValueError("the layer builder runs no Dockerfile: use builder docker with dockerfile")
        secret_ids = [s.id for s in self.secrets]
        if len(set(secret_ids)) != len(secret_ids):
            raise ValueError("secret ids must be unique")
        clash = set(self.build_args) & set(secret_ids)
        if clash:
            raise ValueError(f"{sorted(clash)[0]!r} is both a build arg and a secret; keep it a secret")
        return self


class SecretKeyRef(StrictModel):
    """A value taken from a Kubernetes Secret at run time."""

    secret: Name = Field(description="Name of the Kubernetes Secret.")
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$")] = Field(description="Key in it.")


# A Kubernetes object name that may contain dots (PersistentVolumeClaim, Secret, ServiceAccount).
ObjectName = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", max_length=253),
    Field(description="A Kubernetes object name (DNS-1123 subdomain)."),
]


class DatasetRef(StrictModel):
    """A dataset the training reads, recorded in lineage."""

    name: Name
    ref: str = Field(min_length=1, description="A registry reference or s3:// URI.")
    mount_path: AbsolutePath | None = Field(None, description="Where it is mounted in the pod.")
    claim: ObjectName | None = Field(
        None,
        description="A PersistentVolumeClaim holding the dataset, mounted read-only at mountPath; "
        "default: each pod pulls ref into an emptyDir before training.",
    )


class RdmaSpec(StrictModel):
    resource: str = Field("rdma/rdma_shared_device_a", description="Extended resource name of the RDMA device.")
    count: int = Field(1, ge=1)


class Toleration(StrictModel):
    """A node taint the pods tolerate (core/v1 Toleration)."""

    key: str | None = Field(None, min_length=1)
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(None, ge=0, description="How long a NoExecute taint is tolerated.")

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value")
        if self.key is None and self.operator != "Exists":
            raise ValueError("a toleration without a key must use operator Exists")
        return self


class Resources(StrictModel):
    """Per-node (per-pod) resources besides the GPUs."""

    cpu: Quantity | int | None = None
    memory: Quantity | None = None
    shared_memory: Quantity = Field("16Gi", description="Size of the /dev/shm volume.")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource name of a GPU.")
    rdma: RdmaSpec | None = Field(None, description="RDMA devices; omit for TCP-only clusters.")
    ephemeral_storage: Quantity | None = None


class Topology(StrictModel):
    """Topology-aware placement (Volcano networkTopology, Kueue TAS)."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = Field(None, ge=0, description="Highest network tier a job may span.")
    level: str | None = Field(None, description="Node label of the topology level (Kueue TAS).")


VolcanoEvent = Literal[
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
]


_DEFAULT_RESTART_ON: list[VolcanoEvent] = ["PodEvicted", "PodFailed"]


class FaultTolerance(StrictModel):
    """What happens when a pod or node fails."""

    max_retry: int = Field(3, ge=0, description="Restarts before the job is failed.")
    restart_on: list[VolcanoEvent] = Field(default_factory=lambda: _DEFAULT_RESTART_ON.copy(), min_length=1)
    action: Literal["RestartJob", "RestartTask", "RestartPod", "AbortJob", "TerminateJob"] = Field(
        "RestartJob",
        description="What a failure does: RestartJob restarts the whole gang, RestartTask only the failed task "
        "(on a JobSet: the failed child Job), RestartPod only the failed pod (Volcano only), AbortJob and "
        "TerminateJob fail the job.",
    )
    hang_timeout: Duration = Field("30m", description="NCCL heartbeat timeout before a hung job is killed.")


class Retention(StrictModel):
    """Which pushed checkpoints are kept."""

    last: int = Field(3, ge=1, description="Keep the newest N.")
    best: int = Field(0, ge=0, description="Also keep the best K by metric.")
    metric: str | None = Field(None, description="Metric that ranks checkpoints, such as val_loss.")
    mode: Literal["min", "max"] = "min"

    @model_validator(mode="after")
    def _best_needs_metric(self) -> Retention:
        if self.best and not self.metric:
            raise ValueError("keeping the best checkpoints needs a metric to rank them: set metric")
        return self


class AgentResources(StrictModel):
    """CPU and memory of each checkpoint restore/sidecar container (requests = limits)."""

    cpu: Quantity | int = 1
    memory: Quantity = "2Gi"


class CheckpointPolicy(StrictModel):
    dir: AbsolutePath = Field("/ckpt", description="Where the training writes checkpoints.")
    layout: Literal["auto", "trainops", "huggingface", "megatron", "deepspeed", "dcp"] = "auto"
    keep: Retention = Field(default_factory=Retention)
    resume: str = Field("latest", min_length=1, description="latest, none, or a checkpoint reference to start from.")
    repository: str | None = Field(None, description="Default: <registry>/<name>/checkpoints.")
    dedup: Literal["off", "chunks"] = Field(
        "off",
        description="chunks: push checkpoints in the chunked form (content-defined chunks in packs), sending "
        "only the chunks the repository does not hold yet (registry/SPEC.md, Chunked checkpoints).",
    )
    claim: ObjectName | None = Field(
        None,
        description="A ReadWriteMany PersistentVolumeClaim mounted at dir on every node; default: an emptyDir "
        "per pod (then only what the rank-0 pod writes is pushed).",
    )
    agent_image: ImageRef | None = Field(
        None,
        description="Image (pinned by digest) with trainops for the restore step and sidecar; "
        "default: the train image.",
    )
    registry_secret: ObjectName | None = Field(
        None,
        description="A kubernetes.io/dockerconfigjson Secret: registry credentials of the restore step and sidecar "
        "(DOCKER_CONFIG), also used as the pods' imagePullSecret.",
    )
    grace_period: Duration = Field(
        "10m",
        description="Time a stopping pod (or Slurm job before its time limit) gets to save and push its last "
        "checkpoint: terminationGracePeriodSeconds and the sbatch --signal lead time.",
    )
    agent_resources: AgentResources = Field(default_factory=AgentResources)


class Elastic(StrictModel):
    min_nodes: int = Field(ge=1)
    max_nodes: int = Field(ge=1)
    max_restarts: int = Field(3, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Elastic:
        if self.min_nodes > self.max_nodes:
            raise ValueError("minNodes must not exceed maxNodes")
        return self


SetupLine = Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\n\r\x00]+$")]
LoginHost = Annotated[
    str, StringConstraints(pattern=r"^([A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$")
]


class SlurmOptions(StrictModel):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = Field(None, pattern=r"^([0-9]+-)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}$")
    constraint: str | None = None
    exclusive: bool = True
    run_dir: AbsolutePath | None = Field(
        None,
        description="Shared-filesystem directory for the run's checkpoints and datasets; "
        "default: $SLURM_SUBMIT_DIR/.trainops/runs/<pipeline>/<run-id>.",
    )
    runtime: Literal["pyxis", "bare-metal"] = Field(
        "pyxis",
        description="pyxis: srun runs the image under pyxis/enroot; bare-metal: no container, the trainer runs "
        "in the environment the setup lines prepare (venv, conda, modules) on a shared filesystem.",
    )
    setup: list[SetupLine] = Field(
        default_factory=list,
        description="Shell lines the sbatch script runs first on the batch host (`source venv/bin/activate`, "
        "`module load cuda`: the environment of trainops, and on bare metal of the trainer); they are "
        "commands by design and are written into the script as given.",
    )
    login_host: LoginHost | None = Field(
        None,
        description="[user@]host[:port] of a login node: sbatch, squeue, scontrol and scancel run there over "
        "ssh (your ssh config and keys); default: run them here.",
    )
    submit_dir: AbsolutePath | None = Field(
        None,
        description="Directory sbatch runs in on the login host (the checkout of this project on the shared "
        "filesystem, for bare-metal); default: the manifest's directory here, the home directory over ssh.",
    )


class KueueOptions(StrictModel):
    workload: Literal["job", "jobset"] = "jobset"


class KubeflowOptions(StrictModel):
    """Kubeflow Trainer v2 (scheduler kubeflow): the runtime a TrainJob runs over."""

    runtime: ObjectName | None = Field(
        None,
        description="A training runtime the cluster has (such as torch-distributed). Default: trainops renders "
        "its own TrainingRuntime beside the TrainJob, with the checkpoint restore and watcher of every target.",
    )
    runtime_kind: Literal["ClusterTrainingRuntime", "TrainingRuntime"] = Field(
        "ClusterTrainingRuntime", description="The kind of `runtime` (a TrainingRuntime lives in train.namespace)."
    )


NcclName = Annotated[str, StringConstraints(pattern=r"^(NCCL|TORCH_NCCL)_[A-Z0-9_]+$")]


MetricsAddress = Annotated[str, StringConstraints(pattern=r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$")]


class TrainSpec(StrictModel):
    """The distributed training job."""

    scheduler: Literal["volcano", "kueue", "kubeflow", "pytorchjob", "ray", "kubernetes", "slurm", "local"] = Field(
        "volcano",
        description="kubeflow: a Kubeflow Trainer v2 TrainJob; pytorchjob: the Training Operator's PyTorchJob "
        "(legacy, for clusters that still run it); ray: a KubeRay RayJob; kubernetes: the default scheduler's "
        "own gang scheduling (Workload and PodGroup, Kubernetes 1.37+).",
    )
    image: ImageRef | None = Field(None, description="A prebuilt image; default: the one `image` builds.")
    namespace: Name | None = None
    queue: str | None = Field(None, description="Volcano queue, Kueue LocalQueue or Slurm partition.")
    priority_class: str | None = None
    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(1, ge=0, le=64)
    resources: Resources = Field(default_factory=Resources)
    command: Command
    working_dir: AbsolutePath | None = None
    env: dict[EnvName, str] = Field(default_factory=dict)
    secret_env: dict[EnvName, SecretKeyRef] = Field(
        default_factory=dict, description="Environment from Kubernetes Secrets; never rendered as values."
    )
    nccl: dict[NcclName, str] = Field(default_factory=dict, description="NCCL settings (override defaults).")
    datasets: list[DatasetRef] = Field(default_factory=list)
    topology: Topology | None = None
    fault_tolerance: FaultTolerance = Field(default_factory=FaultTolerance)
    faults: FaultPolicy = Field(
        default_factory=FaultPolicy, description="Failure diagnosis → action, node-health sources (Slurm, local)."
    )
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    metrics_address: MetricsAddress | None = Field(
        "127.0.0.1:9464",
        description="Where the supervisor of `train run` (local, Slurm) serves the run's Prometheus metrics "
        "(/metrics: step, step time, tokens/s, loss, checkpoint age, restarts, ETTR so far), HOST:PORT; "
        "loopback by default, port 0 picks a free one; null: none.",
    )
    elastic: Elastic | None = Field(None, description="Elastic training (PyTorchJob elasticPolicy).")
    slurm: SlurmOptions | None = None
    kueue: KueueOptions | None = None
    kubeflow: KubeflowOptions | None = None
    max_run_duration: Duration | None = None
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels the pods need (nodeSelector), such as a GPU product."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Node taints the pods tolerate (GPU nodes are often tainted)."
    )
    service_account: ObjectName | None = Field(
        None, description="ServiceAccount of the pods (cloud identity for s3:// checkpoints, pull secrets)."
    )
    ttl_after_finished: Duration | None = Field(
        None,
        description="Delete the finished job after this long (ttlSecondsAfterFinished). Unset by default: under "
        "Argo CD self-heal a job its TTL deleted is re-created from git and runs again.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrainSpec:
        if self.scheduler == "local" and self.nodes != 1:
            raise ValueError("the local scheduler runs one node: set nodes: 1 or pick a cluster scheduler")
        if self.slurm is not None and self.scheduler != "slurm":
            raise ValueError("slurm options are set but scheduler is not slurm")
        if self.kueue is not None and self.scheduler != "kueue":
            raise ValueError("kueue options are set but scheduler is not kueue")
        if self.kubeflow is not None and self.scheduler != "kubeflow":
            raise ValueError("kubeflow options are set but scheduler is not kubeflow")
        if self.elastic is not None:
            if self.scheduler != "pytorchjob":
                raise ValueError(
                    "elastic training needs scheduler: pytorchjob (Kubeflow Trainer v2 has no elastic policy)"
                )
            if not self.elastic.min_nodes <= self.nodes <= self.elastic.max_nodes:
                raise ValueError("nodes must lie between elastic.minNodes and elastic.maxNodes")
        clash = set(self.env) & set(self.secret_env)
        if clash:
            raise ValueError(f"{sorted(clash)[0]!r} is in both env and secretEnv")
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ValueError("dataset names must be unique")
        return self


class Gate(StrictModel):
    """A condition an eval metric must meet for the checkpoint to be released."""

    metric: str = Field(min_length=1)
    op: CompareOp
    value: float


class EvalSpec(StrictModel):
    command: Command
    image: ImageRef | None = Field(None, description="Default: the training image.")
    checkpoint: str = Field("latest", min_length=1, description="latest, best, or a checkpoint reference.")
    gpus: int = Field(0, ge=0)
    env: dict[EnvName, str] = Field(default_factory=dict)
    gates: list[Gate] = Field(default_factory=list)
    timeout: Duration | None = None


_TAG_TEMPLATE = r"^[A-Za-z0-9_{}][A-Za-z0-9_.{}-]{0,127}$"
TAG_PLACEHOLDERS = ("step", "commit", "run", "date")


class SigningSpec(StrictModel):
    """How releases are signed (OpenSSF model signing) and whether serving requires it."""

    key: str | None = Field(
        None,
        min_length=1,
        description="PEM private key file (EC P-256/P-384/P-521), relative to the manifest's directory; a "
        "passphrase-protected key takes its passphrase from $TRAINOPS_SIGNING_PASSPHRASE.",
    )
    pkcs11: str | None = Field(
        None,
        pattern=r"^pkcs11:",
        description="RFC 7512 PKCS#11 URI of an EC key in a token (needs PyKCS11); the PIN from "
        "pin-source=file:/ABSOLUTE/PATH or $TRAINOPS_PKCS11_PIN, never pin-value (the manifest is in git).",
    )
    keyless: bool = Field(
        False, description="Keyless Sigstore signing (Fulcio, Rekor, an OIDC identity): not usable offline."
    )
    public_key: str | None = Field(
        None,
        min_length=1,
        description="PEM public key that verifies releases (rollout start, release verify); default: derived from key.",
    )
    required: bool = Field(
        False, description="rollout start refuses a release that is unsigned or does not verify with public_key."
    )
    checkpoints: bool = Field(
        False, description="Also attach signed SLSA provenance to every checkpoint the watcher pushes."
    )

    @model_validator(mode="after")
    def _one_signer(self) -> SigningSpec:
        if self.pkcs11 is not None and "pin-value=" in self.pkcs11.partition("?")[2]:
            raise ValueError(
                "pkcs11: a pin-value would put the PIN in git; use pin-source=file:/PATH or $TRAINOPS_PKCS11_PIN"
            )
        chosen = [name for name, on in (("key", self.key), ("pkcs11", self.pkcs11), ("keyless", self.keyless)) if on]
        if len(chosen) > 1:
            raise ValueError(f"set one of key, pkcs11 or keyless, not {' and '.join(chosen)}")
        if not chosen and self.public_key is None:
            raise ValueError("set key, pkcs11 or keyless (to sign), or publicKey (to verify only)")
        return self


class ReleaseSpec(StrictModel):
    """Publishing a checkpoint that passed its gates as a model."""

    source: str = Field("best", min_length=1, description="best, latest, or a checkpoint reference to release.")
    repository: str | None = Field(None, description="Default: <registry>/<name>/model.")
    tag: str = Field("step-{step}", pattern=_TAG_TEMPLATE, description="Tag template; {step} {commit} {run} {date}.")
    require_gates: bool = Field(True, description="Refuse to release a checkpoint that failed a gate.")
    include: list[str] = Field(
        default_factory=lambda: ["*.safetensors", "*.json"], description="Files of the checkpoint in the model."
    )
    exclude: list[str] = Field(default_factory=lambda: ["optimizer*"])
    annotations: dict[str, str] = Field(default_factory=dict)
    export: Command | None = Field(
        None,
        description="A command converting the checkpoint before packaging (e.g. to a Hugging Face layout): it reads "
        "TRAINOPS_EXPORT_INPUT and writes into TRAINOPS_EXPORT_OUTPUT (an empty directory), which is released.",
    )
    signing: SigningSpec | None = Field(
        None, description="Sign releases with model signing and their SLSA provenance (trainops.signing)."
    )

    @model_validator(mode="after")
    def _known_placeholders(self) -> ReleaseSpec:
        for _, field, _, _ in string.Formatter().parse(self.tag):
            if field is not None and field not in TAG_PLACEHOLDERS:
                raise ValueError(f"unknown placeholder {{{field}}} in tag; use {', '.join(TAG_PLACEHOLDERS)}")
        return self
