"""KubeRay: one ray.io/v1 RayJob, its RayCluster spec inline (KubeRay v1.5).

The cluster is sized from the manifest: a head group (one pod, rank 0, with the checkpoint
restore and watcher) and one worker group `workers` of nodes-1 pods (fixed: replicas =
minReplicas = maxReplicas, no autoscaler), each pod with the GPUs, resources, image,
environment, volumes and placement every target's pods get (trainops.render.pod). KubeRay
starts Ray in the first container (`ray start`, the command it generates: the Ray
containers carry none, since KubeRay runs a given command *before* `ray start`); the number
of GPUs is also passed to Ray as `num-gpus`, whatever the GPU's resource name.

The entrypoint is train.command, joined into one shell-quoted line: KubeRay runs it as
`ray job submit … -- <entrypoint>` from a submitter pod (submissionMode K8sJobMode: a
Kubernetes Job, whose log is the driver's output), and Ray runs it as the job's driver on
the head. It is not wrapped in torchrun: Ray places the training workers itself (Ray Train).
A spec.patches entry that sets the RayJob's spec.entrypoint to anything else is refused
(one entrypoint, train.command, in every target).

Lifetime: shutdownAfterJobFinishes deletes the RayCluster as soon as the job ends
(ttlSecondsAfterFinished 0: no GPU stays held); the RayJob and its submitter's log stay.
faultTolerance.maxRetry is the RayJob's backoffLimit (each retry is a new RayCluster, which
restores the newest checkpoint); train.maxRunDuration its activeDeadlineSeconds.

Queueing: with train.queue the RayJob carries Kueue's `kueue.x-k8s.io/queue-name` (a
LocalQueue; spec.tenants render Kueue's queues), and Kueue admits the head and workers as
one Workload, all or nothing (it suspends the RayJob until then; Kueue requires
shutdownAfterJobFinishes and no autoscaling, both as rendered). Without a queue the pods go
to the default scheduler as KubeRay creates them.
"""

from __future__ import annotations

import shlex
from typing import Any

from trainops.errors import InputError, ManifestError
from trainops.manifest.common import duration_seconds
from trainops.manifest.load import field_problem
from trainops.render.context import RunContext
from trainops.render.kueue import queue_labels
from trainops.render.names import LABEL_ROLE, MAX_LABEL, object_name
from trainops.render.pod import PodRole, placement, pod_security, pod_template

API_VERSION = "ray.io/v1"
KIND = "RayJob"
WORKERS = "workers"
SUBMITTER = "ray-job-submitter"
# KubeRay refuses a RayJob name longer than 47 (its RayCluster gets a 6-character suffix)
MAX_NAME = 47
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))
SUBMITTER_RESOURCES = {"cpu": "1", "memory": "1Gi"}


def entrypoint(command: list[str]) -> str:
    """train.command as the RayJob's entrypoint: one line, each word shell-quoted."""
    return shlex.join(command)


def check_entrypoint(ctx: RunContext) -> None:
    """A spec.patches entry must not give the RayJob another entrypoint than train.command."""
    wanted = entrypoint(list(ctx.train.command))
    for index, patch in enumerate(ctx.spec.patches):
        spec = patch.merge.get("spec") if patch.target.kind == KIND else None
        if isinstance(spec, dict) and "entrypoint" in spec and spec["entrypoint"] != wanted:
            loc = ("spec", "patches", index, "merge", "spec", "entrypoint")
            said = f"the RayJob's entrypoint is train.command ({wanted!r}), not {spec['entrypoint']!r}"
            hint = "change train.command (every target runs it) and remove the entrypoint from the patch"
            if ctx.path is None:
                raise InputError(f"spec.patches[{index}].merge.spec.entrypoint: {said}", hint=hint)
            raise ManifestError([field_problem(ctx.path, env=ctx.env, loc=loc, message=said)], hint=hint)


def _ray_container(template: dict[str, Any], *, ports: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    """The pod template's main container as KubeRay wants it: no command (KubeRay's `ray
    start`), Ray's ports instead of the rendezvous port."""
    main = template["spec"]["containers"][0]
    main.pop("command", None)
    if ports:
        main["ports"] = [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports]
    else:
        main.pop("ports", None)
    return template


def _start_params(ctx: RunContext) -> dict[str, str]:
    gpus = ctx.train.gpus_per_node
    return {"num-gpus": str(gpus)} if gpus else {}


def _submitter(ctx: RunContext) -> dict[str, Any]:
    """The submitter pod: KubeRay gives its container the `ray job submit` command; it runs the
    training image (which has Ray) on the run's nodes, as the run's identity."""
    container = {
        "name": SUBMITTER,
        "image": ctx.image.ref,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": dict(SUBMITTER_RESOURCES), "limits": dict(SUBMITTER_RESOURCES)},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {"restartPolicy": "Never", **placement(ctx.train), "enableServiceLinks": False}
    spec["securityContext"] = pod_security()
    if ctx.train.checkpoint.registry_secret:
        spec["imagePullSecrets"] = [{"name": ctx.train.checkpoint.registry_secret}]
    spec["containers"] = [container]
    return {"metadata": {"labels": {**ctx.labels(), LABEL_ROLE: "submitter"}}, "spec": spec}


def ray_job(ctx: RunContext) -> dict[str, Any]:
    train = ctx.train
    check_entrypoint(ctx)
    workers = train.nodes - 1
    name = object_name(ctx.pipeline, ctx.run_id, reserve=MAX_LABEL - MAX_NAME)
    if train.topology is not None:
        ctx.warn("train.topology has no effect with scheduler ray (a RayJob has no topology field)")
    if train.ttl_after_finished:
        ctx.warn(
            "train.ttlAfterFinished has no effect with scheduler ray: KubeRay deletes the RayCluster when the job "
            "ends and keeps the RayJob"
        )

    def role(kind: str, *, head: bool) -> PodRole:
        return PodRole(
            role=kind,
            endpoint=None,  # no rendezvous of ours: Ray's head (GCS), which KubeRay tells every node
            container="ray-head" if head else "ray-worker",
            sidecar=head,
            restore=head,  # the driver runs on the head and hands the checkpoint to the workers
            restart_policy=None,  # KubeRay's
            deadline=False,  # the RayJob's activeDeadlineSeconds instead
        )

    head = _ray_container(pod_template(ctx, role("leader", head=True)), ports=HEAD_PORTS)
    cluster: dict[str, Any] = {
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {"rayStartParams": _start_params(ctx), "template": head},
    }
    if workers:
        worker = _ray_container(pod_template(ctx, role("worker", head=False)), ports=())
        cluster["workerGroupSpecs"] = [
            {
                "groupName": WORKERS,
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": _start_params(ctx),
                "template": worker,
            }
        ]
    spec: dict[str, Any] = {
        "entrypoint": entrypoint(list(train.command)),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": 0,
        "backoffLimit": train.fault_tolerance.max_retry,
    }
    if train.max_run_duration:
        spec["activeDeadlineSeconds"] = int(duration_seconds(train.max_run_duration))
    spec["submitterPodTemplate"] = _submitter(ctx)
    spec["rayClusterSpec"] = cluster
    labels = queue_labels(ctx) if train.queue else ctx.labels()
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": ctx.metadata(name, labels=labels), "spec": spec}
