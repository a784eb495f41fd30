"""Configuration the simulated cluster writes for its components: kwok's Stages, the Volcano
scheduler's plugins, HyperNodes for the racks and spines, and the admission webhook
configurations (Volcano's, controller-runtime's) pointed at 127.0.0.1."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

LOOPBACK = "127.0.0.1"
EXIT_ANNOTATION = "kwok.trainops.dev/exit"
# the node labels of the racks and spines the fake nodes sit in
RACK_LABEL = "topology.trainops.dev/rack"
SPINE_LABEL = "topology.trainops.dev/spine"


# The Volcano scheduler's configuration: gang, queues with capacity (deserved/capability,
# reclaim between queues), priority and preemption, network-topology-aware placement
# (HyperNodes). gangpreempt/gangreclaim evict whole jobs (Volcano 1.15's gang-aware
# eviction): a gang job is never left running with part of its pods.
VOLCANO_SCHEDULER_CONF = """\
actions: "enqueue, allocate, gangpreempt, gangreclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""


# Preemption of running jobs by a pending one in a full cluster: the capacity plugin lets a
# job into its queue (enqueue) only within the queue's capability capped at what the cluster
# has, so in a full cluster the higher-priority job stays Pending and is never a preemptor.
# Without the enqueue action, allocate lets jobs in and gangpreempt evicts whole lower jobs
# for them (the queue's capability still holds at allocation; the reason given is vaguer).
VOLCANO_PREEMPTING_CONF = VOLCANO_SCHEDULER_CONF.replace('"enqueue, allocate,', '"allocate,')


def kwok_config() -> str:
    """kwok's configuration: our own Stages (node Ready once; pods Running, then finished on request)."""
    return yaml.safe_dump_all(_kwok_documents(), sort_keys=False)


# Go templates kwok renders into an object's status (plain strings: no Python formatting).
_NODE_READY = """\
{{ $now := Now }}
conditions:
- {type: Ready, status: "True", reason: KubeletReady, message: kwok node,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
addresses:
- {type: InternalIP, address: {{ NodeIP | Quote }}}
- {type: Hostname, address: {{ NodeName | Quote }}}
allocatable:
{{ with .status.allocatable }}
{{ YAML . 1 }}
{{ end }}
capacity:
{{ with .status.capacity }}
{{ YAML . 1 }}
{{ end }}
nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: kwok, containerRuntimeVersion: kwok}
phase: Running
"""
_POD_RUNNING = """\
{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
  ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
_POD_FINISHED = """\
{{ $now := Now }}
{{ $code := index .metadata.annotations "EXIT_ANNOTATION" }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  restartCount: 0
  state:
    terminated:
      exitCode: {{ $code }}
      reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
""".replace("EXIT_ANNOTATION", EXIT_ANNOTATION)


def _kwok_documents() -> list[dict[str, Any]]:
    node_ready, pod_running, pod_finished = _NODE_READY, _POD_RUNNING, _POD_FINISHED

    def stage(name: str, kind: str, expressions: list[dict[str, Any]], nxt: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": kind},
                "selector": {"matchExpressions": expressions},
                "next": nxt,
            },
        }

    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    ready_cond = '.status.conditions.[] | select( .type == "Ready" ) | .status'
    exit_key = f'.metadata.annotations["{EXIT_ANNOTATION}"]'
    docs = [
        stage(
            "node-ready",
            "Node",
            [{"key": ready_cond, "operator": "NotIn", "values": ["True"]}],
            {"statusTemplate": node_ready},
        ),
        stage(
            "pod-running",
            "Pod",
            [
                alive,
                {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                {"key": ready_cond, "operator": "NotIn", "values": ["True"]},
            ],
            {"statusTemplate": pod_running},
        ),
        stage(
            "pod-finish-on-request",
            "Pod",
            [
                alive,
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": exit_key, "operator": "Exists"},
            ],
            {"statusTemplate": pod_finished},
        ),
        stage(
            "pod-delete",
            "Pod",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            {"delete": True},
        ),
    ]
    return docs


def webhook_configurations(
    manifests: str, *, prefix: str, port: int, ca: Path, keep: frozenset[str]
) -> list[dict[str, Any]]:
    """A project's kubebuilder webhook configurations, served at https://127.0.0.1:PORT.

    ``manifests`` is what the project's webhook kustomization builds (``kubectl kustomize``):
    the release's own patches included, such as the object selectors that limit JobSet's and
    LeaderWorkerSet's pod webhooks to their own pods (without them every pod the cluster
    creates would pass through them). Only webhooks on API groups in ``keep`` are registered:
    the others belong to integrations not enabled here, whose paths the manager does not
    serve (with failurePolicy Fail, every matching request would be refused).
    """
    bundle = base64.b64encode(ca.read_bytes()).decode()
    out = []
    for doc in yaml.safe_load_all(manifests):
        if not doc or not doc.get("webhooks"):
            continue
        hooks = []
        for hook in doc["webhooks"]:
            groups = {g for rule in hook.get("rules", []) for g in rule.get("apiGroups", [])}
            if not groups <= keep:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{LOOPBACK}:{port}{path}", "caBundle": bundle}
            hooks.append(hook)
        if hooks:
            doc["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
            doc["webhooks"] = hooks
            out.append(doc)
    return out


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


# Volcano's admission webhooks as its Helm chart enables them by default (v1.15.1): path,
# mutating?, API group/version, resource, operations. The pods webhooks are off there too.
VOLCANO_WEBHOOKS: tuple[tuple[str, bool, str, str, tuple[str, ...]], ...] = (
    ("/jobs/mutate", True, "batch.volcano.sh/v1alpha1", "jobs", ("CREATE",)),
    ("/jobs/validate", False, "batch.volcano.sh/v1alpha1", "jobs", ("CREATE", "UPDATE")),
    ("/podgroups/validate", False, "scheduling.volcano.sh/v1beta1", "podgroups", ("CREATE",)),
    ("/queues/mutate", True, "scheduling.volcano.sh/v1beta1", "queues", ("CREATE",)),
    ("/queues/validate", False, "scheduling.volcano.sh/v1beta1", "queues", ("CREATE", "UPDATE", "DELETE")),
    ("/hypernodes/validate", False, "topology.volcano.sh/v1alpha1", "hypernodes", ("CREATE", "UPDATE")),
    ("/cronjobs/validate", False, "batch.volcano.sh/v1alpha1", "cronjobs", ("CREATE", "UPDATE")),
)


def volcano_webhook_configurations(*, port: int, ca: Path, namespace: str) -> list[dict[str, Any]]:
    """One webhook configuration per Volcano admission path, served at https://127.0.0.1:PORT.

    The names are the ones vc-webhook-manager looks up at start (``volcano-admission-service``
    and the path with dashes; it waits for each and sets its caBundle): it registers no
    configuration itself. Objects in Volcano's own namespace and kube-system are not sent
    to it (as the chart has it); a refusal or an unreachable webhook refuses the request.
    """
    bundle = base64.b64encode(ca.read_bytes()).decode()
    out = []
    for path, mutating, api_version, resource, operations in VOLCANO_WEBHOOKS:
        group, version = api_version.split("/")
        noun, verb = path.strip("/").split("/")
        hook: dict[str, Any] = {
            "name": f"{verb}{noun.removesuffix('s')}.volcano.sh",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"https://{LOOPBACK}:{port}{path}", "caBundle": bundle},
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 10,
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [namespace, "kube-system"]}
                ]
            },
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": [version],
                    "resources": [resource],
                    "operations": list(operations),
                }
            ],
        }
        if mutating:
            hook["reinvocationPolicy"] = "Never"
        kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": "volcano-admission-service" + path.replace("/", "-")},
                "webhooks": [hook],
            }
        )
    return out
