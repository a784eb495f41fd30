"""Kubeflow Trainer v2: a trainer.kubeflow.org/v1alpha1 TrainJob over a training runtime.

The Trainer controller turns a TrainJob into a JobSet from its runtime: one replicatedJob
`node` (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`) of numNodes Indexed pods,
whose container `node` takes the TrainJob's trainer.image, command, env and resourcesPerNode,
plus the PET_* variables of the runtime's torch policy. Pods are `<job>-node-0-<index>` under
the JobSet's headless Service `<job>`, so `<job>-node-0-0.<job>` is the rendezvous host (the
Trainer's own PET_MASTER_ADDR). One template serves every rank, so the checkpoint watcher gets
`--leader-only` and TRAINOPS_NODE_RANK from the completion index, as on a Kueue Job.

The runtime, by train.kubeflow.runtime:

- unset (the default): trainops renders its torch-distributed runtime beside the TrainJob, as a
  TrainingRuntime of the same name in train.namespace: the pod template every Kubernetes target
  gets (the checkpoint restore, the watcher sidecar, volumes, placement, security), the
  torch policy and the JobSet's failure policy (faultTolerance.maxRetry restarts of the whole
  gang), in Argo CD sync wave -1 (the Trainer refuses a TrainJob whose runtime is not there
  yet). A runtime per run: its agents run the run's image, which a shared ClusterTrainingRuntime
  cannot carry (RuntimePatches may not set a container's image or command, nor add one);
  the GitOps controller prunes it with the run.
- a runtime the cluster has (such as upstream's ClusterTrainingRuntime torch-distributed):
  the TrainJob references it and carries what trainops needs on its `node` pods as a
  RuntimePatch of manager `trainops.dev/run` — the run's labels, volumes and their mounts,
  service account, node selector, tolerations, security context, grace period. Such a
  runtime has no checkpoint restore nor watcher (a warning says so).

Queueing: with train.queue the TrainJob carries `kueue.x-k8s.io/queue-name` (Kueue's
TrainJob integration suspends and admits it; spec.tenants render Kueue queues). spec.patches
whose target kind is JobSet (the JobSet the Trainer makes) become RuntimePatches, one per
patch, manager `trainops.dev/spec.patches.<index>`: Trainer v2.2 replaced
PodTemplateOverrides with them, and they accept metadata and the restricted pod fields only.
train.maxRunDuration is the TrainJob's activeDeadlineSeconds.
"""

from __future__ import annotations

from typing import Any

from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT
from trainops.render.kueue import MAX_EXEC_LABEL, QUEUE_LABEL
from trainops.render.names import digits, object_name
from trainops.render.patches import plain
from trainops.render.pod import PodRole, pod_template
from trainops.render.quantity import canonical

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
NODE = "node"  # the Trainer's name for the trainer's replicatedJob and its container
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RUN_MANAGER = "trainops.dev/run"
PATCH_MANAGER = "trainops.dev/spec.patches."
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
# the TrainJob's trainer takes these of the node container; the runtime keeps the rest
_TRAINER_FIELDS = ("image", "command", "env", "resources")
# what a RuntimePatch may set in a pod spec (Trainer v2.3 PodSpecPatch)
_PATCHABLE_POD = (
    "serviceAccountName",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "affinity",
    "tolerations",
    "terminationGracePeriodSeconds",
)


def job_name(ctx: RunContext) -> str:
    """The TrainJob's name (and its JobSet's): pod hostnames are <name>-node-0-<index>."""
    return object_name(ctx.pipeline, ctx.run_id, reserve=len(f"-{NODE}-0-") + digits(ctx.train.nodes))


def _role(ctx: RunContext, name: str) -> PodRole:
    return PodRole(
        role=NODE,
        endpoint=f"{name}-{NODE}-0-0.{name}:{RDZV_PORT}",
        container=NODE,
        sidecar=True,
        leader_only=True,
        deadline=False,  # the TrainJob's activeDeadlineSeconds instead
    )


def _labels(ctx: RunContext) -> dict[str, str]:
    labels = ctx.labels()
    if ctx.train.queue:
        labels[QUEUE_LABEL] = ctx.train.queue
        if ctx.train.max_run_duration:
            labels[MAX_EXEC_LABEL] = str(int(duration_seconds(ctx.train.max_run_duration)))
    return labels


def _trainer(ctx: RunContext, node: dict[str, Any]) -> dict[str, Any]:
    """spec.trainer from the node container's image, command, env and resources."""
    trainer: dict[str, Any] = {"numNodes": ctx.train.nodes}
    if ctx.train.gpus_per_node:
        trainer["numProcPerNode"] = ctx.train.gpus_per_node
    trainer["image"] = node["image"]
    trainer["command"] = node["command"]
    trainer["env"] = node["env"]
    # as the Trainer's webhooks store them (Go's canonical quantities): spec.trainer is
    # immutable, so a re-apply of other text for the same quantity (32 for "32") is refused
    trainer["resourcesPerNode"] = {
        side: {name: canonical(value) for name, value in amounts.items()} for side, amounts in node["resources"].items()
    }
    return trainer


def _runtime(ctx: RunContext, name: str, template: dict[str, Any]) -> dict[str, Any]:
    job = {
        "completionMode": "Indexed",
        "backoffLimit": 0,  # a failed pod fails the gang: the JobSet restarts every Job
        "podReplacementPolicy": "Failed",
        "template": template,
    }
    spec: dict[str, Any] = {
        "mlPolicy": {"numNodes": ctx.train.nodes, "torch": {}},
        "template": {
            "spec": {
                "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                "failurePolicy": {"maxRestarts": ctx.train.fault_tolerance.max_retry},
                "replicatedJobs": [
                    {
                        "name": NODE,
                        "replicas": 1,
                        "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}}, "spec": job},
                    }
                ],
            }
        },
    }
    metadata = ctx.metadata(name)
    metadata["annotations"] = {**ctx.annotations(), SYNC_WAVE: "-1"}  # before the TrainJob the Trainer admits by it
    return {"apiVersion": API_VERSION, "kind": "TrainingRuntime", "metadata": metadata, "spec": spec}


def _run_patch(ctx: RunContext, template: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """What trainops needs on the node pods of a runtime it did not render."""
    pod = {key: template["spec"][key] for key in _PATCHABLE_POD if key in template["spec"]}
    for volume in pod.get("volumes") or []:  # immutable in a RuntimePatch: as the webhook stores it
        if "sizeLimit" in (volume.get("emptyDir") or {}):
            volume["emptyDir"]["sizeLimit"] = canonical(volume["emptyDir"]["sizeLimit"])
    pod["containers"] = [
        {"name": NODE, "volumeMounts": node["volumeMounts"], "securityContext": node["securityContext"]}
    ]
    if ctx.train.priority_class:
        ctx.warn(
            f"train.priorityClass {ctx.train.priority_class} is not set on the pods of runtime "
            f"{_runtime_name(ctx)}: a RuntimePatch cannot set priorityClassName (the runtime's own template can)"
        )
    replicated = {"name": NODE, "template": {"spec": {"template": {"metadata": template["metadata"], "spec": pod}}}}
    return {"manager": RUN_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated]}}}}


def _runtime_name(ctx: RunContext) -> str:
    options = ctx.train.kubeflow
    return options.runtime if options is not None and options.runtime else ""


def runtime_ref(ctx: RunContext) -> dict[str, str]:
    """The TrainJob's runtimeRef: the cluster's runtime train.kubeflow names, else trainops' own."""
    options = ctx.train.kubeflow
    if options is not None and options.runtime:
        return {"apiGroup": GROUP, "kind": options.runtime_kind, "name": options.runtime}
    return {"apiGroup": GROUP, "kind": "TrainingRuntime", "name": job_name(ctx)}


def _check_pulled(ctx: RunContext, runtime: str) -> None:
    """A dataset trainops pulls needs the pull init container, which a runtime of the cluster lacks."""
    for index, data in enumerate(ctx.train.datasets):
        if data.mount_path is not None and not data.claim:
            raise InputError(
                f"train.datasets[{index}] ({data.name}) would be pulled by an init container, which runtime "
                f"{runtime} of the cluster lacks (a RuntimePatch cannot add one)",
                hint="give the dataset a claim (a PVC that holds it), or leave train.kubeflow.runtime unset",
            )


def _spec_patches(ctx: RunContext, name: str) -> list[dict[str, Any]]:
    """spec.patches of kind JobSet as RuntimePatches, in the manifest's order."""
    out = []
    for index, patch in enumerate(ctx.spec.patches):
        if patch.target.kind != "JobSet":
            continue
        if patch.target.name is not None and patch.target.name != name:
            raise InputError(
                f"spec.patches[{index}]: no rendered JobSet named {patch.target.name} to patch",
                hint=f"the Trainer names the JobSet of this run {name}; leave target.name out",
            )

        merge = plain(patch.merge)
        out.append({"manager": f"{PATCH_MANAGER}{index}", "trainingRuntimeSpec": {"template": merge}})
    return out


def train_job(ctx: RunContext) -> list[dict[str, Any]]:
    """The runtime trainops renders (unless train.kubeflow.runtime names one), then the TrainJob."""
    train = ctx.train
    name = job_name(ctx)
    if train.topology is not None:
        ctx.warn("train.topology has no effect with scheduler kubeflow (a TrainJob has no topology field)")
    template = pod_template(ctx, _role(ctx, name))
    node = template["spec"]["containers"][0]
    trainer = _trainer(ctx, node)
    for key in _TRAINER_FIELDS:
        node.pop(key)
    runtime_name = _runtime_name(ctx)
    out: list[dict[str, Any]] = []
    patches: list[dict[str, Any]] = []
    ref = runtime_ref(ctx)
    if runtime_name:
        _check_pulled(ctx, runtime_name)
        patches.append(_run_patch(ctx, template, node))
        ctx.warn(
            f"train.kubeflow.runtime {runtime_name}: the cluster's runtime has no checkpoint restore nor "
            "watcher (a RuntimePatch cannot add containers): checkpoints are neither restored nor pushed; "
            "leave train.kubeflow.runtime unset for trainops' own runtime"
        )
    else:
        out.append(_runtime(ctx, name, template))
    patches += _spec_patches(ctx, name)
    spec: dict[str, Any] = {"runtimeRef": ref, "trainer": trainer}
    if patches:
        spec["runtimePatches"] = patches
    if train.max_run_duration:
        spec["activeDeadlineSeconds"] = int(duration_seconds(train.max_run_duration))
    out.append({"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": ctx.metadata(name, labels=_labels(ctx)),
                "spec": spec})  # fmt: skip
    return out
