"""The eval of a checkpoint as a Kubernetes Job: a batch/v1 Job, or a Volcano Job when
train.scheduler is volcano, whose one container runs `trainops eval run` in the image —
the same code path as a local eval (pull verified, run eval.command, gates, report).

Files (relative to the GitOps path):

    eval/manifest-configmap.yaml   the manifest the pod reads (a ConfigMap, mounted read-only)
    eval/job.yaml                  batch/v1 Job (every scheduler but volcano)
    eval/volcano-job.yaml          batch.volcano.sh/v1alpha1 Job (scheduler volcano)

The checkpoint is pinned by digest when rendered, so the Job evaluates exactly that
checkpoint whatever `latest` means when it runs. Registry credentials come from
train.checkpoint.registrySecret (DOCKER_CONFIG) and the AWS_* entries of train.secretEnv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainops.manifest.common import duration_seconds
from trainops.manifest.pipeline import PipelineSpec
from trainops.manifest.stages import EvalSpec, TrainSpec
from trainops.render.image import PinnedImage
from trainops.render.names import ANNOTATION_IMAGE, common_labels, object_name
from trainops.render.pod import REGISTRY_AUTH_DIR, placement, pod_security

MANIFEST_DIR = "/etc/trainops"
MANIFEST_FILE = "trainops.yaml"
A_CHECKPOINT = "trainops.dev/checkpoint"
PULL_MARGIN = 1800  # seconds the Job gets beyond eval.timeout to pull the checkpoint and push the report


@dataclass(frozen=True)
class EvalJobInput:
    pipeline: str
    run_id: str
    env: str | None  # the --env the manifest was loaded with
    manifest_text: str
    checkpoint: str  # ref@sha256:…
    image: PinnedImage
    spec: PipelineSpec
    train: TrainSpec
    eval: EvalSpec
    user_labels: dict[str, str]  # metadata.labels of the manifest


def _argv(job: EvalJobInput) -> list[str]:
    argv = ["trainops", "eval", "run", job.checkpoint, "-f", f"{MANIFEST_DIR}/{MANIFEST_FILE}"]
    argv += ["--workdir", job.train.working_dir or "."]
    if job.env:
        argv += ["--env", job.env]
    return argv


def _env(job: EvalJobInput) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "TRAINOPS_IMAGE", "value": job.image.ref},
        {"name": "TRAINOPS_IMAGE_DIGEST", "value": job.image.digest},
        {"name": "TRAINOPS_CACHE_DIR", "value": "/tmp/trainops-cache"},  # HOME may not be writable
    ]
    if job.train.checkpoint.registry_secret:
        env.append({"name": "DOCKER_CONFIG", "value": REGISTRY_AUTH_DIR})
    for name, ref in job.train.secret_env.items():  # the registry's credentials; the eval's own env is eval.env
        if name.startswith("AWS_"):
            env.append({"name": name, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}})
    return env


def _resources(job: EvalJobInput) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if job.train.resources.cpu is not None:
        res["cpu"] = job.train.resources.cpu
    if job.train.resources.memory is not None:
        res["memory"] = job.train.resources.memory
    if job.eval.gpus:
        res[job.train.resources.gpu_resource] = job.eval.gpus
    return {"requests": dict(res), "limits": dict(res)} if res else {}


def _volumes(job: EvalJobInput, configmap: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "manifest", "configMap": {"name": configmap}},
        {"name": "scratch", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "manifest", "mountPath": MANIFEST_DIR, "readOnly": True},
        {"name": "scratch", "mountPath": "/tmp"},
    ]
    secret = job.train.checkpoint.registry_secret
    if secret:
        items = [{"key": ".dockerconfigjson", "path": "config.json"}]
        source = {"secretName": secret, "items": items, "defaultMode": 0o440}
        volumes.append({"name": "registry-auth", "secret": source})
        mounts.append({"name": "registry-auth", "mountPath": REGISTRY_AUTH_DIR, "readOnly": True})
    return volumes, mounts


def pod_template(job: EvalJobInput, configmap: str, labels: dict[str, str]) -> dict[str, Any]:
    train = job.train
    volumes, mounts = _volumes(job, configmap)
    container: dict[str, Any] = {
        "name": "eval",
        "image": job.image.ref,
        "imagePullPolicy": "IfNotPresent",
        "command": _argv(job),
        "env": _env(job),
    }
    if train.working_dir:
        container["workingDir"] = train.working_dir
    resources = _resources(job)
    if resources:
        container["resources"] = resources
    container["volumeMounts"] = mounts
    container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    spec.update(placement(train))
    if train.priority_class:
        spec["priorityClassName"] = train.priority_class
    spec["enableServiceLinks"] = False
    spec["securityContext"] = pod_security()
    if train.checkpoint.registry_secret:
        spec["imagePullSecrets"] = [{"name": train.checkpoint.registry_secret}]
    spec["containers"] = [container]
    spec["volumes"] = volumes
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def eval_objects(job: EvalJobInput) -> list[tuple[str, dict[str, Any]]]:
    """(file, object) pairs: the manifest ConfigMap, then the Job."""
    name = object_name(job.pipeline, f"eval-{job.run_id}")
    labels = common_labels(job.pipeline, run_id=job.run_id, component="eval", extra=job.user_labels)
    meta: dict[str, Any] = {"name": name}
    if job.train.namespace:
        meta["namespace"] = job.train.namespace
    meta["labels"] = labels
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": dict(meta),
        "immutable": True,
        "data": {MANIFEST_FILE: job.manifest_text},
    }
    meta["annotations"] = {ANNOTATION_IMAGE: job.image.ref, A_CHECKPOINT: job.checkpoint}
    deadline = int(duration_seconds(job.eval.timeout)) + PULL_MARGIN if job.eval.timeout else None
    template = pod_template(job, name, labels)
    if job.train.scheduler == "volcano":
        spec: dict[str, Any] = {"schedulerName": "volcano", "minAvailable": 1}
        if job.train.queue:
            spec["queue"] = job.train.queue
        # no restart: Volcano's maxRetry counts the failing attempt, and 0 is "unset" to its
        # webhook, which makes it 3 (and refuses git's 0 on every later apply)
        spec["maxRetry"] = 1
        if deadline:
            template["spec"]["activeDeadlineSeconds"] = deadline
        spec["tasks"] = [{"name": "eval", "replicas": 1, "minAvailable": 1, "maxRetry": 1, "template": template}]
        volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": spec}
        return [("eval/manifest-configmap.yaml", configmap), ("eval/volcano-job.yaml", volcano)]
    batch: dict[str, Any] = {"backoffLimit": 0}
    if deadline:
        batch["activeDeadlineSeconds"] = deadline
    if job.train.ttl_after_finished:
        batch["ttlSecondsAfterFinished"] = int(duration_seconds(job.train.ttl_after_finished))
    if job.train.queue and job.train.scheduler in ("kueue", "ray"):  # ray: the tenants' queues are Kueue's
        meta["labels"] = {**labels, "kueue.x-k8s.io/queue-name": job.train.queue}
        batch["suspend"] = True  # Kueue admits it
    batch["template"] = template
    return [
        ("eval/manifest-configmap.yaml", configmap),
        ("eval/job.yaml", {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": batch}),
    ]
