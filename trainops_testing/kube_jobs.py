"""What trainops renders, put on the simulated cluster and watched there (tests and bench/).

``render_job`` renders examples/tiny-llm's training job (or its tenants) through trainops'
own render with a few train fields changed (an environment written beside a copy of the
manifest, the way a user would add one); ``apply`` stands in for the GitOps controller
(server-side apply, strict field validation); the rest reads pods and PodGroups back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.kube_cluster import EXIT_ANNOTATION, RACK_LABEL, ApiError, KubeApi, KubeCluster
from trainops_testing.services import wait_for

REPO = Path(__file__).resolve().parent.parent
TINY_LLM = REPO / "examples" / "tiny-llm" / "trainops.yaml"
IMAGE = "registry.invalid/tiny-llm/train@sha256:" + "0" * 64
JOB_NAME_LABEL = "volcano.sh/job-name"


def manifest_with(directory: Path, *, env: str = "sim", cluster: dict[str, Any] | None = None, **train: Any) -> Path:
    """examples/tiny-llm's manifest in ``directory`` with an environment ``env`` overriding
    ``train`` fields (camelCase keys, as in the YAML) and, when given, spec.cluster; returns
    the manifest's path. Off Volcano, the example's patch of its Volcano Job is dropped (it
    would match nothing)."""
    data = yaml.safe_load(TINY_LLM.read_text())
    overlay: dict[str, Any] = {"train": train}
    if cluster is not None:
        overlay["cluster"] = cluster
    if train.get("scheduler", "volcano") != "volcano":
        overlay["patches"] = []
    data.setdefault("environments", {})[env] = overlay
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trainops.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def render_job(
    directory: Path, *, run_id: str, env: str = "sim", cluster: dict[str, Any] | None = None, **train: Any
) -> list[dict[str, Any]]:
    """The training job's objects, rendered by trainops for tiny-llm with ``train`` overrides."""
    from trainops.manifest.load import load_manifest
    from trainops.render.api import render_train

    manifest = load_manifest(manifest_with(directory, env=env, cluster=cluster, **train), env=env)
    return list(render_train(manifest, image=IMAGE, run_id=run_id).objects)


def render_tenants(
    directory: Path,
    *,
    env: str = "sim",
    tenants: list[dict[str, Any]] | None = None,
    cluster: dict[str, Any] | None = None,
    **train: Any,
) -> list[dict[str, Any]]:
    """spec.tenants rendered by trainops (Volcano Queues, or Kueue flavors and queues), with
    spec.cluster.topology's objects when ``cluster`` declares one."""
    from trainops.manifest.load import load_manifest
    from trainops.render.api import render_tenants as render

    path = manifest_with(directory, env=env, cluster=cluster, **train)
    if tenants is not None:
        data = yaml.safe_load(path.read_text())
        data["environments"][env]["tenants"] = tenants
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return list(render(load_manifest(path, env=env)).objects)


def apply(api: KubeApi, objects: Iterable[dict[str, Any]]) -> None:
    """Stands in for Argo CD: server-side apply of each object, strict field validation."""
    for obj in objects:
        ns = obj["metadata"].get("namespace")
        if ns:
            ensure_namespace(api, ns)
        _apply_retrying(api, obj)


def _apply_retrying(api: KubeApi, obj: dict[str, Any]) -> None:
    """A Volcano Job that Volcano's webhook refuses only because its Queue is not yet there or
    not yet open (trainops.cluster.dryrun.queue_pending) is applied again, as Argo CD
    retries a sync; any other refusal is raised at once."""
    from trainops.cluster.dryrun import queue_pending

    refused: list[ApiError] = []

    def admitted() -> bool:
        try:
            api.apply(obj)
        except ApiError as exc:
            if queue_pending(obj, str(exc), {(obj.get("spec") or {}).get("queue")}):
                return False
            refused.append(exc)
        return True

    wait_for(admitted, timeout=30, what=f"{obj['kind']} {obj['metadata']['name']} admitted")
    if refused:
        raise refused[0]


def ensure_namespace(api: KubeApi, name: str) -> None:
    try:
        api.get("v1", "Namespace", name)
    except ApiError as exc:
        if exc.status != 404:
            raise
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        # pods need the namespace's default ServiceAccount (the controller-manager makes it)
        wait_for(
            lambda: bool(api.get("v1", "ServiceAccount", "default", name)),
            timeout=30,
            what=f"ServiceAccount default in {name}",
        )


def priority_class(name: str, value: int, *, preempt: bool = True) -> dict[str, Any]:
    """A PriorityClass as the cluster's administrator defines it (trainops renders the reference)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority" if preempt else "Never",
    }


@dataclass(frozen=True)
class Placement:
    """Where a job's pods are: how many exist, which nodes the bound ones are on."""

    pods: int
    nodes: tuple[str, ...]  # the node of each bound pod

    @property
    def bound(self) -> int:
        return len(self.nodes)

    @property
    def partial(self) -> bool:
        return 0 < self.bound < self.pods


def placement(api: KubeApi, namespace: str, job: str) -> Placement:
    pods = api.list("v1", "Pod", namespace, selector=f"{JOB_NAME_LABEL}={job}")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    nodes = tuple(sorted(p["spec"]["nodeName"] for p in live if p["spec"].get("nodeName")))
    return Placement(pods=len(live), nodes=nodes)


def wait_bound(api: KubeApi, namespace: str, job: str, pods: int, *, timeout: float = 60) -> Placement:
    """Wait until all ``pods`` of a Volcano job are bound; fail if a partial binding lingers."""
    last = Placement(0, ())

    def done() -> bool:
        nonlocal last
        last = placement(api, namespace, job)
        return last.pods == pods and last.bound == pods

    wait_for(done, timeout=timeout, what=f"{pods} pods of {namespace}/{job} bound (last: {last})", interval=0.1)
    return last


def stays_unbound(api: KubeApi, namespace: str, job: str, *, seconds: float) -> Placement:
    """Watch a job for ``seconds`` (several scheduling cycles): none of its pods may be bound."""
    deadline = time.monotonic() + seconds
    while True:
        now = placement(api, namespace, job)
        assert now.bound == 0, f"{namespace}/{job}: {now.bound} of {now.pods} pods bound: {now.nodes}"
        if time.monotonic() >= deadline:
            return now
        time.sleep(0.2)  # pacing: the condition is "stays so", checked throughout


def podgroup(api: KubeApi, namespace: str, job: str) -> dict[str, Any]:
    """The PodGroup Volcano made for a job (named after it, with the job's uid)."""
    for pg in api.list("scheduling.volcano.sh/v1beta1", "PodGroup", namespace):
        owners = pg["metadata"].get("ownerReferences", [])
        if any(o.get("name") == job for o in owners):
            return pg
    raise AssertionError(f"no PodGroup owned by {namespace}/{job}")


def podgroup_says(api: KubeApi, namespace: str, job: str, *, condition: str = "Unschedulable") -> str:
    """Wait for the job's PodGroup to carry ``condition`` and return its reason and message."""
    text = ""

    def has() -> bool:
        nonlocal text
        for cond in podgroup(api, namespace, job).get("status", {}).get("conditions", []):
            if cond["type"] == condition and cond["status"] == "True":
                text = f"{cond.get('reason', '')}: {cond.get('message', '')}"
                return True
        return False

    wait_for(has, timeout=30, what=f"PodGroup of {namespace}/{job} {condition}", interval=0.2)
    return text


def racks_of(cluster: KubeCluster, nodes: Iterable[str]) -> set[str]:
    index = {name: i for i, name in enumerate(cluster.nodes)}
    return {cluster.node_labels(index[n])[RACK_LABEL] for n in nodes}


def finish_pods(api: KubeApi, namespace: str, selector: str, *, code: int = 0) -> int:
    """Tell kwok the matching pods' containers exited with ``code`` (Succeeded or Failed)."""
    pods = api.list("v1", "Pod", namespace, selector=selector)
    for pod in pods:
        patch = {"metadata": {"annotations": {EXIT_ANNOTATION: str(code)}}}
        api.merge_patch("v1", "Pod", pod["metadata"]["name"], patch, namespace)
    return len(pods)


def delete_all(api: KubeApi, namespace: str, api_version: str, kind: str) -> None:
    for obj in api.list(api_version, kind, namespace):
        api.delete(api_version, kind, obj["metadata"]["name"], namespace)


def live_pods(api: KubeApi, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The matching pods not being deleted, by name."""
    pods = api.list("v1", "Pod", namespace, selector=selector)
    return sorted((p for p in pods if not p["metadata"].get("deletionTimestamp")), key=lambda p: p["metadata"]["name"])


def fail_pod(api: KubeApi, namespace: str, pod: dict[str, Any]) -> None:
    """kwok ends one running pod with exit code 1 (its container "crashed")."""
    patch = {"metadata": {"annotations": {EXIT_ANNOTATION: "1"}}}
    api.merge_patch("v1", "Pod", pod["metadata"]["name"], patch, namespace)


def running_again(api: KubeApi, namespace: str, selector: str, pods: int, *, old: set[str]) -> bool:
    """All ``pods`` of a job Running, and none of them one of the ``old`` uids: the restart is over."""
    now = live_pods(api, namespace, selector)
    return len(now) == pods and all(
        p["metadata"]["uid"] not in old and p["status"].get("phase") == "Running" for p in now
    )


def kueue_train(scheduler: str, namespace: str) -> dict[str, Any]:
    """spec.train fields of a job Kueue queues: in ``namespace``, on the LocalQueue of the same
    name, with no priority class, topology or run limit."""
    return {
        "scheduler": scheduler, "namespace": namespace, "queue": namespace, "priorityClass": None, "topology": None,
        "maxRunDuration": None,
    }  # fmt: skip


def kueue_tenant(namespace: str) -> dict[str, Any]:
    """A tenant owning ``namespace`` with two 8-GPU nodes' worth of quota (CPU and memory ample)."""
    return {
        "name": namespace,
        "namespaces": [namespace],
        "gpus": {"deserved": 16},
        "cpu": {"deserved": "4096"},
        "memory": {"deserved": "64Ti"},
    }


def delete_jobs(api: KubeApi, namespace: str, api_version: str, kind: str) -> None:
    """Delete every ``kind`` in ``namespace`` and wait until no pod is left there."""
    delete_all(api, namespace, api_version, kind)
    wait_for(lambda: not api.list("v1", "Pod", namespace), timeout=60, what=f"the {kind}s' pods deleted")


def run_pods(api: KubeApi, namespace: str, run_id: str) -> list[dict[str, Any]]:
    return api.list("v1", "Pod", namespace, selector=f"trainops.dev/run-id={run_id}")


def kueue_holds_then_admits(
    sim: KubeCluster, directory: Path, *, train: dict[str, Any], api_version: str, kind: str, placed: int
) -> Path:
    """Kueue, all or nothing, on ``train`` (``kueue_train``) and the tenant of its namespace
    (``kueue_tenant``): a job over the quota (run "big", 3 nodes, 24 GPUs) carries the queue
    label, is held suspended with its Workload waiting for quota (as trainops reads its state)
    and has no pod; one within it (run "small", 2 nodes) gets all ``placed`` pods bound while
    the big one still has none. The big job's manifest, for the caller's further reads."""
    from trainops.cluster.access import ClusterAccess
    from trainops.cluster.client import connect
    from trainops.manifest.load import load_manifest
    from trainops.train.kube_jobs import RunState, run_states

    ns = train["namespace"]
    apply(sim.api, render_tenants(directory / "t", tenants=[kueue_tenant(ns)], **train))
    big = render_job(directory / "big", run_id="big", nodes=3, **train)
    job = next(o for o in big if o["kind"] == kind)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == train["queue"]
    apply(sim.api, big)
    manifest = directory / "big" / "trainops.yaml"
    spec = load_manifest(manifest, env="sim").require_train()
    with connect(ClusterAccess(str(sim.kubeconfig))) as cluster:
        seen: list[RunState] = []

        def held() -> bool:
            # the Workload's condition (Kueue's) and the job's phase (a RayJob's is KubeRay's
            # status, written by another controller, maybe later) both
            seen[:] = run_states(cluster, train=spec, pipeline="tiny-llm", run_id="big")
            return seen[0].phase == "Suspended" and bool(seen[0].reason and "QuotaReserved" in seen[0].reason)

        wait_for(held, timeout=60, what=f"the big {kind} suspended, its Workload waiting for quota", interval=0.5)
    state = seen[0]
    assert "insufficient" in str(state.reason), state
    assert sim.api.get(api_version, kind, job["metadata"]["name"], ns)["spec"]["suspend"] is True
    assert run_pods(sim.api, ns, "big") == []  # not one pod: all or nothing

    apply(sim.api, render_job(directory / "small", run_id="small", nodes=2, **train))
    wait_for(
        lambda: len([p for p in run_pods(sim.api, ns, "small") if p["spec"].get("nodeName")]) == placed,
        timeout=90,
        what=f"the admitted {kind}'s {placed} pods placed",
        interval=0.5,
    )
    assert run_pods(sim.api, ns, "big") == []
    return manifest
