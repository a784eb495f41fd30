"""Does the cluster run what a Kubeflow Trainer TrainJob needs: the Trainer's CRDs, its
controller, the runtime the manifest names. `validate --kubeconfig` reports these with the
rest, each at its manifest field; `train submit --cluster` refuses before committing anything
(a TrainJob the cluster cannot run would sit in git, refused at every sync).

What installs a kind is trainops.cluster.installs' table. A controller installed with its
CRDs registers admission webhooks for its API group; CRDs left without their controller have
none: that is how a missing Trainer controller shows. The runtime train.kubeflow.runtime
names (a ClusterTrainingRuntime, or a TrainingRuntime of train.namespace) must exist: the
Trainer refuses a TrainJob without it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from trainops.cluster.client import Cluster
from trainops.cluster.installs import RUNTIMES, install_hint
from trainops.errors import Problem, RemoteError
from trainops.manifest import Manifest
from trainops.manifest.load import field_problem

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
GROUP = "trainer.kubeflow.org"
_WEBHOOKS = ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
_Located = Callable[[tuple[str | int, ...], str], Problem]


def _webhook_groups(cluster: Cluster) -> set[str] | None:
    """API groups some validating webhook of the cluster covers (None: not allowed to look)."""
    try:
        configurations = cluster.list(*_WEBHOOKS)
    except RemoteError:
        return None
    return {
        group
        for config in configurations
        for hook in config.get("webhooks") or []
        for rule in hook.get("rules") or []
        for group in rule.get("apiGroups") or []
    }


def needs_group(manifest: Manifest) -> str | None:
    """The API group whose objects controller_problems speaks for (the TrainJob's, the runtime's)."""
    train = manifest.pipeline.spec.train
    return GROUP if train is not None and train.scheduler == "kubeflow" else None


def controller_problems(cluster: Cluster, manifest: Manifest) -> list[Problem]:
    """What the cluster lacks to run the manifest's TrainJob, each at its field (none for other schedulers)."""
    if needs_group(manifest) is None:
        return []

    def problem(loc: tuple[str | int, ...], text: str) -> Problem:
        return field_problem(manifest.path, env=manifest.env, loc=("spec", "train", *loc), message=text)

    what = " ".join(TRAINJOB)
    hint = install_hint(TRAINJOB[0])
    if not cluster.served(*TRAINJOB):
        return [problem(("scheduler",), f"the cluster at {cluster.server} does not serve {what}: {hint}")]
    groups = _webhook_groups(cluster)
    if groups is not None and GROUP not in groups:
        text = (
            f"the cluster at {cluster.server} serves {what} but runs no Kubeflow Trainer controller (no admission "
            f"webhook for {GROUP}: its CRDs are there without it): {hint}"
        )
        return [problem(("scheduler",), text)]
    return _runtime_problems(cluster, manifest, problem)


def _runtime_problems(cluster: Cluster, manifest: Manifest, problem: _Located) -> list[Problem]:
    train = manifest.require_train()
    options = train.kubeflow
    if options is None or not options.runtime:
        return []  # trainops renders its own
    kind = options.runtime_kind
    namespace = train.namespace or cluster.namespace
    scope = f" in namespace {namespace}" if kind == "TrainingRuntime" else ""
    api_version = TRAINJOB[0]
    if cluster.get(api_version, kind, options.runtime, namespace=namespace) is not None:
        return []
    have = sorted(str(item["metadata"]["name"]) for item in cluster.list(api_version, kind, namespace=namespace))
    others = f"it has {', '.join(have)}" if have else f"it has none; upstream's: {RUNTIMES}"
    text = f"the cluster has no {kind} {options.runtime}{scope}: name one it has ({others}), or leave it unset"
    return [problem(("kubeflow", "runtime"), text)]


def trainjob_pod(job: dict[str, Any], objects: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The Pod the Trainer would make for TrainJob `job` from trainops' TrainingRuntime among
    `objects` (rendered with it): the runtime's `node` pod template, its `node` container given
    the TrainJob's image, command, env and resources. None for a runtime of the cluster's.
    The API server checks a runtime's pod template against the CRD's schema only: a dry run of
    this Pod asks what it would say when the JobSet's Jobs create the pods."""
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    meta = job["metadata"]
    runtime = next(
        (o for o in objects
         if o.get("kind") == "TrainingRuntime" and o["metadata"].get("name") == ref.get("name")
         and o["metadata"].get("namespace") == meta.get("namespace")),
        None,
    )  # fmt: skip
    if ref.get("kind") != "TrainingRuntime" or runtime is None:
        return None
    replicated = ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or []
    node: dict[str, Any] = next((j for j in replicated if j.get("name") == "node"), {})
    template = ((node.get("template") or {}).get("spec") or {}).get("template")
    if not isinstance(template, dict):
        return None
    spec = copy.deepcopy(template.get("spec") or {})
    trainer = (job.get("spec") or {}).get("trainer") or {}
    for container in spec.get("containers") or []:
        if container.get("name") == "node":
            for key, field in (
                ("image", "image"),
                ("command", "command"),
                ("env", "env"),
                ("resourcesPerNode", "resources"),
            ):
                if key in trainer:
                    container[field] = copy.deepcopy(trainer[key])
    pod_meta = {**(template.get("metadata") or {}), "name": f"{meta['name']}-node"}
    if meta.get("namespace"):
        pod_meta["namespace"] = meta["namespace"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
