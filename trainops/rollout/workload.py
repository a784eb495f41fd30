"""The engine's pods and the objects around them: Deployment, LeaderWorkerSet, Services, ServiceMonitor.

A pod runs the engine on the model in /models and the serving image, both pinned by digest:
- model delivery `init-container`: an emptyDir filled by `trainops pull RELEASE@sha256:… /models`
  (every byte verified against its digest) before the engine starts; the agent image
  (rollout.agentImage, default the serving image) must contain trainops.
  With rollout.verifySignature the pull first checks the release's model signature with the
  public key mounted from a ConfigMap or Secret (`--verify-signature --key`), and copies
  nothing unless it verifies.
- `image-volume`: the model artifact mounted read-only as an image volume
  (`volumes[].image.reference`, Kubernetes ≥ 1.31 with the ImageVolume feature on); the
  kubelet pulls it like an image, so the registry must be one the nodes reach (oci://).
GPUs as requests equal to limits; a memory-backed /dev/shm; a startup probe on the
engine's health endpoint whose budget (rollout.startupBudget) covers loading the weights,
then readiness and liveness on the same endpoint; a numeric non-root security context.
"""

from __future__ import annotations

import math
from typing import Any

from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.render.checkpoint import with_insecure
from trainops.render.image import cluster_image
from trainops.render.pod import UID, pod_security
from trainops.rollout.context import ANNOTATION_RELEASE, LABEL_METRICS, ServeContext
from trainops.rollout.engine import (
    HEALTH_PATH,
    METRICS_PATH,
    MODEL_DIR,
    engine_commands,
    gpus_per_pod,
    nodes_per_replica,
)
from trainops.rollout.state import Served

PROBE_PERIOD = 10
# labels the LeaderWorkerSet controller gives its pods: the set's name, and a value unique to
# each group (one replica)
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
SIGNING_DIR = "/etc/trainops/signing"  # where the init container reads rollout.verifySignature's key
SIGNING_VOLUME = "signing-key"


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "runAsUser": UID,
        "capabilities": {"drop": ["ALL"]},
    }


def resources(ctx: ServeContext, gpus: int) -> dict[str, Any]:
    values: dict[str, Any] = {ctx.rollout.gpu_resource: str(gpus)}
    if ctx.rollout.cpu is not None:
        values["cpu"] = str(ctx.rollout.cpu)
    if ctx.rollout.memory is not None:
        values["memory"] = ctx.rollout.memory
    return {"requests": dict(values), "limits": dict(values)}


def _probes(port: str) -> dict[str, Any]:
    return {"httpGet": {"path": HEALTH_PATH, "port": port}, "periodSeconds": PROBE_PERIOD}


def _model_source(ctx: ServeContext, served: Served) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the model volume, the init containers that fill it)."""
    if ctx.rollout.model_delivery == "image-volume":
        if ctx.rollout.verify_signature is not None:
            raise InputError(
                "rollout.verifySignature needs modelDelivery init-container: an image volume is mounted by the "
                "kubelet, which checks no model signature",
                hint="use modelDelivery: init-container, or verify with an admission policy",
            )
        if not served.release.startswith("oci://"):
            raise InputError(
                f"rollout.modelDelivery image-volume needs the release in an oci:// registry, not {served.release}",
                hint="publish the release to an OCI registry the nodes pull from, or use modelDelivery init-container",
            )
        reference = cluster_image(served.reference.with_digest(served.digest))  # host/repository@sha256:…
        return {"name": "model", "image": {"reference": reference, "pullPolicy": "IfNotPresent"}}, []
    if served.release.startswith("file://"):  # one line for every release there (ctx.warn keeps one of each)
        ctx.warn(
            "the release is in a file:// registry, which pods in a cluster cannot read: serve from oci:// or s3://"
        )
    argv = with_insecure(["trainops", "pull", served.release, MODEL_DIR], ctx.insecure, served.release)
    mounts: list[dict[str, Any]] = [{"name": "model", "mountPath": MODEL_DIR}]
    key = ctx.rollout.verify_signature
    if key is not None:  # the signature is checked before a byte of the model is copied
        argv += ["--verify-signature", "--key", f"{SIGNING_DIR}/{key.key}"]
        mounts.append({"name": SIGNING_VOLUME, "mountPath": SIGNING_DIR, "readOnly": True})
    init = {
        "name": "model-pull",
        "image": ctx.rollout.agent_image or served.image,
        "imagePullPolicy": "IfNotPresent",
        "command": argv,
        "volumeMounts": mounts,
        "securityContext": _container_security(),
    }
    return {"name": "model", "emptyDir": {}}, [init]


def _signing_volume(ctx: ServeContext) -> list[dict[str, Any]]:
    """The public key of rollout.verifySignature as a volume (a ConfigMap or a Secret)."""
    key = ctx.rollout.verify_signature
    if key is None or ctx.rollout.model_delivery != "init-container":
        return []
    items = [{"key": key.key, "path": key.key}]
    if key.secret is not None:
        return [{"name": SIGNING_VOLUME, "secret": {"secretName": key.secret, "items": items}}]
    return [{"name": SIGNING_VOLUME, "configMap": {"name": key.config_map, "items": items}}]


def _engine_container(ctx: ServeContext, served: Served, command: list[str], *, leader: bool) -> dict[str, Any]:
    rollout = ctx.rollout
    container: dict[str, Any] = {
        "name": "engine",
        "image": served.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": [{"name": "HOME", "value": "/tmp"}],
    }
    if leader:
        container["ports"] = [{"name": "http", "containerPort": rollout.port, "protocol": "TCP"}]
        budget = max(1, math.ceil(duration_seconds(rollout.startup_budget) / PROBE_PERIOD))
        container["startupProbe"] = {**_probes("http"), "failureThreshold": budget}
        container["readinessProbe"] = {**_probes("http"), "failureThreshold": 3}
        container["livenessProbe"] = {**_probes("http"), "periodSeconds": 30, "failureThreshold": 3}
    container["resources"] = resources(ctx, gpus_per_pod(rollout))
    container["volumeMounts"] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model", "mountPath": MODEL_DIR, "readOnly": True},
    ]
    container["securityContext"] = _container_security()
    return container


def pod_template(ctx: ServeContext, served: Served, *, track: str | None, worker: bool = False) -> dict[str, Any]:
    """The pod template of the leader (or the only pod) of a replica, or of a worker."""
    commands = engine_commands(ctx.rollout, ctx.pipeline)
    command = commands.worker if worker and commands.worker is not None else commands.leader
    volume, init = _model_source(ctx, served)
    spec: dict[str, Any] = {"enableServiceLinks": False, "securityContext": pod_security()}
    if init:
        spec["initContainers"] = init
    spec["containers"] = [_engine_container(ctx, served, command, leader=not worker)]
    spec["volumes"] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": ctx.rollout.shared_memory}},
        volume,
        *_signing_volume(ctx),
    ]
    metadata: dict[str, Any] = {"labels": {**ctx.labels(track), LABEL_METRICS: "true"}}
    annotations = {ANNOTATION_RELEASE: served.release}
    if ctx.rollout.metrics == "annotations" and not worker:
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(ctx.rollout.port),
                "prometheus.io/path": METRICS_PATH,
            }
        )
    metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def deployment(ctx: ServeContext, served: Served, *, name: str, track: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": ctx.metadata(name, track=track),
        "spec": {
            "replicas": ctx.rollout.replicas,
            "selector": {"matchLabels": ctx.selector(track)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": pod_template(ctx, served, track=track),
        },
    }


def _one_pod_per_node(name: str) -> dict[str, Any]:
    """No two pods of one group on the same node: each pod is one of the replica's nodes
    (gpusPerNode GPUs, the engine's parallelism sized for that). GPU requests alone keep them
    apart only where a node has exactly gpusPerNode GPUs; on bigger nodes the scheduler would
    pack a group onto one. The selector names the set; matchLabelKeys narrows it to the pod's
    own group (the API server refuses a key in both)."""
    term = {
        "labelSelector": {"matchLabels": {LWS_NAME_LABEL: name}},
        "matchLabelKeys": [LWS_GROUP_KEY],
        "topologyKey": "kubernetes.io/hostname",
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _group_template(ctx: ServeContext, served: Served, *, name: str, track: str, worker: bool) -> dict[str, Any]:
    template = pod_template(ctx, served, track=track, worker=worker)
    template["spec"]["affinity"] = _one_pod_per_node(name)
    return template


def leader_worker_set(ctx: ServeContext, served: Served, *, name: str, track: str) -> dict[str, Any]:
    """A LeaderWorkerSet: each replica a group of nodes_per_replica pods on as many nodes,
    created and restarted together."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": ctx.metadata(name, track=track),
        "spec": {
            "replicas": ctx.rollout.replicas,
            "leaderWorkerTemplate": {
                "size": nodes_per_replica(ctx.rollout),
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _group_template(ctx, served, name=name, track=track, worker=False),
                "workerTemplate": _group_template(ctx, served, name=name, track=track, worker=True),
            },
            "startupPolicy": "LeaderReady",
        },
    }


def workload(ctx: ServeContext, served: Served, *, name: str, track: str) -> dict[str, Any]:
    if nodes_per_replica(ctx.rollout) > 1:
        return leader_worker_set(ctx, served, name=name, track=track)
    return deployment(ctx, served, name=name, track=track)


def service(ctx: ServeContext, *, name: str, selector: dict[str, str], track: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name, track=track),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": ctx.rollout.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def metrics_objects(ctx: ServeContext, selector: dict[str, str]) -> list[dict[str, Any]]:
    """A headless Service over every engine pod and the ServiceMonitor that scrapes it (none with annotations)."""
    if ctx.rollout.metrics == "annotations":
        return []
    name = f"{ctx.name}-metrics"
    svc = service(ctx, name=name, selector=selector)
    svc["metadata"]["labels"][LABEL_METRICS] = "true"
    svc["spec"] = {"clusterIP": "None", **svc["spec"]}
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": ctx.metadata(name),
        "spec": {
            "selector": {"matchLabels": {**ctx.selector(), LABEL_METRICS: "true"}},
            "endpoints": [{"port": "http", "path": METRICS_PATH, "interval": "15s"}],
        },
    }
    return [svc, monitor]
