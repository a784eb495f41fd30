"""The pod template every Kubernetes target shares.

Every pod gets the image by digest; GPUs, RDMA, cpu, memory and ephemeral-storage as
requests equal to limits (Guaranteed QoS, which the CPU and topology managers need to pin
cores and align NUMA); a memory-backed /dev/shm; the checkpoint volume at
train.checkpoint.dir (the PVC in checkpoint.claim, else an emptyDir); datasets with a
mountPath (their PVC read-only, or an emptyDir a `trainops pull` init container fills);
the environment of `trainops.render.env`; secrets only as secretKeyRef; a numeric non-root
security context (the images run as 1000:1000) that drops every capability (IPC_LOCK stays
when RDMA needs locked memory); no service links (a big namespace would otherwise inject
thousands of variables).

Checkpoints: the restore init container (`trainops ckpt pull --latest`) runs before
training; the watcher runs as a native sidecar (an init container with restartPolicy
Always), started after the restore and stopped with SIGTERM after training ends, given
checkpoint.gracePeriod to push the last checkpoint. Both run checkpoint.agentImage (default:
the training image) with the registry credentials of checkpoint.registrySecret mounted
read-only and DOCKER_CONFIG pointing at them, and the AWS_* entries of secretEnv.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from trainops import podenv
from trainops.errors import InputError
from trainops.manifest.common import duration_seconds
from trainops.manifest.stages import TrainSpec
from trainops.render.checkpoint import pull_argv, qualify, restore_steps, watch_argv
from trainops.render.context import RunContext
from trainops.render.env import RDZV_PORT, check_names, launch_argv, run_identity
from trainops.render.names import LABEL_ROLE
from trainops.slo.exporter import POD_HOST
from trainops.slo.render import METRICS_PORT, pod_metrics_port

UID = 1000
REGISTRY_AUTH_DIR = "/var/run/secrets/trainops/registry"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
_RESOURCE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


@dataclass(frozen=True)
class PodRole:
    """What differs between the pod templates of one job."""

    role: str  # the trainops.dev/role label: leader, worker or node
    endpoint: str | None  # host:port of the c10d rendezvous (the rank-0 pod); None: the scheduler's own (Ray)
    container: str = "train"
    port_name: str = "rdzv"
    is_host: bool | None = None  # whether this template's pods host the rendezvous store
    sidecar: bool = False  # run the checkpoint watcher here
    leader_only: bool = False  # one template for every rank: the watcher checks TRAINOPS_NODE_RANK
    restore: bool = True
    restore_rank: str | None = None  # the node rank its restore pulls the shards of (None: every file)
    restart_policy: str | None = "Never"
    deadline: bool = True  # maxRunDuration as the pods' activeDeadlineSeconds
    priority_class: bool = True
    subdomain: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)


def bounded(prefix: str, name: str) -> str:
    """`prefix-name` as a DNS label of at most 63 characters."""
    text = f"{prefix}-{name}"
    if len(text) <= 63:
        return text
    return f"{text[:54].rstrip('-')}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _resource_name(value: str, field_name: str) -> str:
    if not _RESOURCE_NAME.match(value) or len(value) > 253:
        raise InputError(
            f"{field_name} {value!r} is not a Kubernetes resource name", hint="use a name such as nvidia.com/gpu"
        )
    return value


def main_resources(train: TrainSpec) -> dict[str, Any]:
    """Requests (= limits) of the training container, in a fixed order."""
    res = train.resources
    out: dict[str, Any] = {}
    if res.cpu is not None:
        out["cpu"] = res.cpu
    if res.memory is not None:
        out["memory"] = res.memory
    if res.ephemeral_storage is not None:
        out["ephemeral-storage"] = res.ephemeral_storage
    if train.gpus_per_node:
        out[_resource_name(res.gpu_resource, "train.resources.gpuResource")] = train.gpus_per_node
    if res.rdma is not None:
        out[_resource_name(res.rdma.resource, "train.resources.rdma.resource")] = res.rdma.count
    return out


def _agent_resources(ctx: RunContext) -> dict[str, Any]:
    agent = ctx.train.checkpoint.agent_resources
    res = {"cpu": agent.cpu, "memory": agent.memory}
    return {"requests": dict(res), "limits": dict(res)}


def _container_security(ctx: RunContext, *, main: bool) -> dict[str, Any]:
    caps: dict[str, Any] = {"drop": ["ALL"]}
    if main and ctx.train.resources.rdma is not None:
        caps["add"] = ["IPC_LOCK"]
    return {"allowPrivilegeEscalation": False, "capabilities": caps}


def pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _literal(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"name": name, "value": value} for name, value in pairs]


def _secret_env(ctx: RunContext, *, only_aws: bool) -> list[dict[str, Any]]:
    return [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}}
        for name, ref in ctx.train.secret_env.items()
        if not only_aws or name.startswith("AWS_")
    ]


def _node_rank() -> dict[str, Any]:
    return {"name": podenv.NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}


def _agent_env(ctx: RunContext, role: PodRole) -> list[dict[str, Any]]:
    identity = run_identity(
        pipeline=ctx.pipeline,
        run_id=ctx.run_id,
        image=ctx.image.ref,
        digest=ctx.image.digest,
        ckpt_dir=ctx.train.checkpoint.dir,
        repository=ctx.repository,
        commit=ctx.commit,
    )
    pairs = list(identity.items())
    if ctx.train.checkpoint.registry_secret:
        pairs.append((podenv.DOCKER_CONFIG, REGISTRY_AUTH_DIR))
    env = _literal(pairs)
    if role.leader_only:
        env.append(_node_rank())
    return env + _secret_env(ctx, only_aws=True)


def _check_mounts(ctx: RunContext) -> None:
    paths = {"/dev/shm": "the shared-memory volume", ctx.train.checkpoint.dir: "train.checkpoint.dir"}
    if ctx.train.checkpoint.registry_secret:
        paths[REGISTRY_AUTH_DIR] = "the registry credentials"
    for i, data in enumerate(ctx.train.datasets):
        if data.mount_path is None:
            continue
        mine = posixpath.normpath(data.mount_path)
        for other, what in paths.items():
            theirs = posixpath.normpath(other)
            if mine == theirs or mine.startswith(theirs + "/") or theirs.startswith(mine + "/"):
                raise InputError(
                    f"train.datasets[{i}].mountPath {data.mount_path} overlaps {what} ({other})",
                    hint="mount each dataset at a directory of its own",
                )
        paths[data.mount_path] = f"train.datasets[{i}].mountPath"


def _volumes(ctx: RunContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts of the main container, mounts of the agent containers)."""
    train = ctx.train
    ckpt = train.checkpoint
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": train.resources.shared_memory}},
        {
            "name": "checkpoints",
            **({"persistentVolumeClaim": {"claimName": ckpt.claim}} if ckpt.claim else {"emptyDir": {}}),
        },
    ]
    main: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "checkpoints", "mountPath": ckpt.dir},
    ]
    agent: list[dict[str, Any]] = [{"name": "checkpoints", "mountPath": ckpt.dir}]
    for data in train.datasets:
        if data.mount_path is None:
            continue
        name = bounded("dataset", data.name)
        source = (
            {"persistentVolumeClaim": {"claimName": data.claim, "readOnly": True}} if data.claim else {"emptyDir": {}}
        )
        volumes.append({"name": name, **source})
        main.append({"name": name, "mountPath": data.mount_path, "readOnly": True})
    if ckpt.registry_secret:
        volumes.append(
            {
                "name": "registry-auth",
                "secret": {
                    "secretName": ckpt.registry_secret,
                    "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                    "defaultMode": 0o440,
                },
            }
        )
        agent.append({"name": "registry-auth", "mountPath": REGISTRY_AUTH_DIR, "readOnly": True})
    return volumes, main, agent


def _agent(
    ctx: RunContext, role: PodRole, name: str, command: list[str], mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "name": name,
        "image": ctx.agent_image.ref,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": _agent_env(ctx, role),
        "resources": _agent_resources(ctx),
        "volumeMounts": mounts,
        "securityContext": _container_security(ctx, main=False),
    }


def placement(train: TrainSpec) -> dict[str, Any]:
    """Where a pod of the run may go and as whom: serviceAccountName, nodeSelector, tolerations."""
    spec: dict[str, Any] = {}
    if train.service_account:
        spec["serviceAccountName"] = train.service_account
    if train.node_selector:
        spec["nodeSelector"] = dict(train.node_selector)
    if train.tolerations:
        spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in train.tolerations]
    return spec


def _restore_containers(ctx: RunContext, role: PodRole, mounts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The restore step's init containers: an indexed template's pods restore their own
    node's shards (its node rank from the pod), a leader its own when workers restore theirs."""
    node_rank = "auto" if role.leader_only else role.restore_rank
    steps = restore_steps(ctx.train, ctx.repository, registry=ctx.spec.registry, insecure=ctx.insecure,
                          node_rank=node_rank)  # fmt: skip
    return [_agent(ctx, role, name, command, mounts) for name, command in steps]


def pod_template(ctx: RunContext, role: PodRole) -> dict[str, Any]:
    train = ctx.train
    check_names(train)
    _check_mounts(ctx)
    volumes, main_mounts, agent_mounts = _volumes(ctx)

    env = _literal(ctx.process_env(endpoint=role.endpoint))
    if role.leader_only:
        env.append(_node_rank())
    env += _secret_env(ctx, only_aws=False)
    resources = main_resources(train)
    main: dict[str, Any] = {
        "name": role.container,
        "image": ctx.image.ref,
        "imagePullPolicy": "IfNotPresent",
        "command": list(train.command)
        if role.endpoint is None
        else launch_argv(
            list(train.command), train=train, endpoint=role.endpoint, run_id=ctx.run_id, is_host=role.is_host
        ),
    }
    if train.working_dir:
        main["workingDir"] = train.working_dir
    main.update(
        {
            "env": env,
            "ports": [{"name": role.port_name, "containerPort": RDZV_PORT, "protocol": "TCP"}],
            "resources": {"requests": dict(resources), "limits": dict(resources)},
            "volumeMounts": main_mounts,
            "securityContext": _container_security(ctx, main=True),
        }
    )

    init = _restore_containers(ctx, role, agent_mounts) if role.restore else []
    auth = [m for m in agent_mounts if m["name"] == "registry-auth"]
    for data in train.datasets:
        if data.mount_path is None or data.claim:
            continue
        volume = bounded("dataset", data.name)
        command = pull_argv(qualify(data.ref, ctx.spec.registry), data.mount_path, insecure=ctx.insecure)
        init.append(_agent(ctx, role, volume, command, [{"name": volume, "mountPath": data.mount_path}, *auth]))
    if role.sidecar:
        command = watch_argv(train, ctx.repository, ctx.run_id, leader_only=role.leader_only, insecure=ctx.insecure)
        port = pod_metrics_port(ctx.spec)
        if port is not None:  # what the run's PodMonitor scrapes (trainops.slo.render)
            command += ["--metrics-address", f"{POD_HOST}:{port}"]
        watcher = _agent(ctx, role, "ckpt-watch", command, agent_mounts)
        if port is not None:
            watcher["ports"] = [{"name": METRICS_PORT, "containerPort": port, "protocol": "TCP"}]
        init.append({"name": watcher.pop("name"), "restartPolicy": "Always", **watcher})

    spec: dict[str, Any] = {}
    if role.restart_policy:
        spec["restartPolicy"] = role.restart_policy
    if role.subdomain:
        spec["subdomain"] = role.subdomain
    spec.update(placement(train))
    if role.priority_class and train.priority_class:
        spec["priorityClassName"] = train.priority_class
    if role.deadline and train.max_run_duration:
        spec["activeDeadlineSeconds"] = int(duration_seconds(train.max_run_duration))
    spec["terminationGracePeriodSeconds"] = int(duration_seconds(train.checkpoint.grace_period))
    spec["enableServiceLinks"] = False
    spec["securityContext"] = pod_security()
    if train.checkpoint.registry_secret:
        spec["imagePullSecrets"] = [{"name": train.checkpoint.registry_secret}]
    if init:
        spec["initContainers"] = init
    spec["containers"] = [main]
    spec["volumes"] = volumes

    metadata: dict[str, Any] = {"labels": {**ctx.labels(), LABEL_ROLE: role.role}}
    if role.annotations:
        metadata["annotations"] = dict(role.annotations)
    return {"metadata": metadata, "spec": spec}
