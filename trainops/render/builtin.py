"""Schemas for the kinds rendered without a vendored CRD: batch/v1 Job, apps/v1 Deployment,
v1 Service, v1 ConfigMap, JobSet, Kueue ResourceFlavor, the Workload API's Workload and
PodGroup, and the endpoint picker's ServiceAccount, Role and RoleBinding.

What is upstream-checked: every pod template in them (batch/v1 Job `spec.template`, JobSet
`spec.replicatedJobs[].template.spec.template`) is validated against the core
PodTemplateSpec schema that the vendored Volcano Job CRD carries
(`spec.tasks[].template`, generated from k8s.io/api), as is apps/v1 Deployment
`spec.template`, and ResourceFlavor tolerations against
its Toleration schema. What is not: the fields around them, checked against the small,
closed allow-lists below, written from the Kubernetes API reference (batch/v1 JobSpec,
apps/v1 DeploymentSpec, core/v1 ServiceSpec) and the JobSet (v1alpha2) and Kueue (v1beta2) API types — field names,
types and enums, not every rule the API server or a webhook applies. A `--crds DIR` that
holds a CRD for JobSet or ResourceFlavor is used instead.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

from trainops.render.crds import CLOSED, crd_index, make_validator, subschema

STRING: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
INT32: dict[str, Any] = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
INT64: dict[str, Any] = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
INT_OR_STRING: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": STRING}


def obj(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, CLOSED: True}
    if required:
        out["required"] = list(required)
    return out


def arr(items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **extra}


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def nonneg(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "minimum": 0}


META_LITE = obj(
    {"labels": STRING_MAP, "annotations": STRING_MAP, "name": STRING, "namespace": STRING, "finalizers": arr(STRING)}
)
LABEL_SELECTOR = obj(
    {
        "matchLabels": STRING_MAP,
        "matchExpressions": arr(obj({"key": STRING, "operator": STRING, "values": arr(STRING)}, "key", "operator")),
    }
)


def _root(api_version: str, kind: str, spec: dict[str, Any], *required: str) -> dict[str, Any]:
    return obj(
        {
            "apiVersion": {"type": "string", "enum": [api_version]},
            "kind": {"type": "string", "enum": [kind]},
            "metadata": {"type": "object"},  # ObjectMeta: checked by trainops.render.validate
            "spec": spec,
        },
        "apiVersion",
        "kind",
        "metadata",
        *required,
    )


def _core_source(crds_dir: Path | None) -> tuple[Path | None, str]:
    """Where the core pod schemas come from: crds_dir's Volcano Job CRD, else the vendored one."""
    index = crd_index(crds_dir)
    if ("batch.volcano.sh", "Job") not in index and crds_dir is not None:
        return None, "v1alpha1"
    return crds_dir, "v1alpha1"


@lru_cache(maxsize=4)
def pod_template_schema(crds_dir: Path | None) -> dict[str, Any]:
    """core/v1 PodTemplateSpec, strict, as the Volcano Job CRD (generated from k8s.io/api) has it,
    with what Kubernetes 1.37 added that trainops renders: `spec.schedulingGroup` (a pod's
    PodGroup, the Workload API's)."""
    source, version = _core_source(crds_dir)
    ref = crd_index(source)[("batch.volcano.sh", "Job")]
    template = copy.deepcopy(subschema(ref, version, ["spec", "tasks", "[]", "template"]))
    pod = template["properties"]["spec"]
    pod["properties"].setdefault("schedulingGroup", obj({"podGroupName": STRING}))
    return template


@lru_cache(maxsize=4)
def toleration_schema(crds_dir: Path | None) -> dict[str, Any]:
    source, version = _core_source(crds_dir)
    ref = crd_index(source)[("batch.volcano.sh", "Job")]
    return subschema(ref, version, ["spec", "tasks", "[]", "template", "spec", "tolerations", "[]"])


def job_spec(pod_template: dict[str, Any]) -> dict[str, Any]:
    """batch/v1 JobSpec (Kubernetes 1.33)."""
    exit_codes = obj(
        {"containerName": STRING, "operator": enum("In", "NotIn"), "values": arr(INT32)}, "operator", "values"
    )
    pod_condition = obj({"type": STRING, "status": STRING}, "type", "status")
    failure_rule = obj(
        {
            "action": enum("FailJob", "FailIndex", "Ignore", "Count"),
            "onExitCodes": exit_codes,
            "onPodConditions": arr(pod_condition),
        },
        "action",
    )
    success_rule = obj({"succeededIndexes": STRING, "succeededCount": INT32})
    return obj(
        {
            "parallelism": nonneg(INT32),
            "completions": nonneg(INT32),
            "completionMode": enum("NonIndexed", "Indexed"),
            "activeDeadlineSeconds": {**INT64, "minimum": 1},
            "backoffLimit": nonneg(INT32),
            "backoffLimitPerIndex": nonneg(INT32),
            "maxFailedIndexes": nonneg(INT32),
            "podFailurePolicy": obj({"rules": arr(failure_rule)}, "rules"),
            "successPolicy": obj({"rules": arr(success_rule)}, "rules"),
            "podReplacementPolicy": enum("TerminatingOrFailed", "Failed"),
            "selector": LABEL_SELECTOR,
            "manualSelector": BOOL,
            "suspend": BOOL,
            "managedBy": STRING,
            "ttlSecondsAfterFinished": nonneg(INT32),
            "template": pod_template,
        },
        "template",
    )


def deployment_spec(pod_template: dict[str, Any]) -> dict[str, Any]:
    """apps/v1 DeploymentSpec."""
    rolling = obj({"maxUnavailable": INT_OR_STRING, "maxSurge": INT_OR_STRING})
    return obj(
        {
            "replicas": nonneg(INT32),
            "selector": LABEL_SELECTOR,
            "template": pod_template,
            "strategy": obj({"type": enum("Recreate", "RollingUpdate"), "rollingUpdate": rolling}),
            "minReadySeconds": nonneg(INT32),
            "revisionHistoryLimit": nonneg(INT32),
            "paused": BOOL,
            "progressDeadlineSeconds": nonneg(INT32),
        },
        "selector",
        "template",
    )


def service_spec() -> dict[str, Any]:
    """core/v1 ServiceSpec."""
    port = obj(
        {
            "name": STRING,
            "protocol": enum("TCP", "UDP", "SCTP"),
            "appProtocol": STRING,
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "targetPort": INT_OR_STRING,
            "nodePort": INT32,
        },
        "port",
    )
    return obj(
        {
            "type": enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"),
            "clusterIP": STRING,
            "clusterIPs": arr(STRING),
            "selector": STRING_MAP,
            "ports": arr(port),
            "publishNotReadyAddresses": BOOL,
            "sessionAffinity": enum("ClientIP", "None"),
            "sessionAffinityConfig": obj({"clientIP": obj({"timeoutSeconds": INT32})}),
            "ipFamilies": arr(enum("IPv4", "IPv6")),
            "ipFamilyPolicy": enum("SingleStack", "PreferDualStack", "RequireDualStack"),
            "internalTrafficPolicy": enum("Cluster", "Local"),
            "externalTrafficPolicy": enum("Cluster", "Local"),
            "externalIPs": arr(STRING),
            "externalName": STRING,
            "loadBalancerClass": STRING,
            "loadBalancerSourceRanges": arr(STRING),
            "allocateLoadBalancerNodePorts": BOOL,
            "healthCheckNodePort": INT32,
            "trafficDistribution": STRING,
        }
    )


def _gang_fields() -> dict[str, Any]:
    """What a Workload's pod group template and a PodGroup share (scheduling.k8s.io/v1beta1)."""
    return {
        "schedulingPolicy": obj({"basic": obj({}), "gang": obj({"minCount": {**INT32, "minimum": 1}}, "minCount")}),
        "disruptionMode": obj({"all": obj({}), "single": obj({})}),
        "priorityClassName": STRING,
        "priority": INT32,
        "preemptionPolicy": enum("Never", "PreemptLowerPriority"),
    }


def workload_spec() -> dict[str, Any]:
    """scheduling.k8s.io/v1beta1 WorkloadSpec (Kubernetes 1.37), the part trainops renders."""
    template = obj({"name": STRING, **_gang_fields()}, "name", "schedulingPolicy")
    reference = obj({"apiGroup": STRING, "kind": STRING, "name": STRING}, "kind", "name")
    return obj({"controllerRef": reference, "podGroupTemplates": arr(template, minItems=1, maxItems=8)})


def podgroup_spec() -> dict[str, Any]:
    """scheduling.k8s.io/v1beta1 PodGroupSpec (Kubernetes 1.37), the part trainops renders."""
    reference = obj({"workloadName": STRING, "templateName": STRING}, "workloadName", "templateName")
    return obj({"workloadRef": reference, **_gang_fields()}, "schedulingPolicy")


def jobset_spec(pod_template: dict[str, Any]) -> dict[str, Any]:
    """jobset.x-k8s.io/v1alpha2 JobSetSpec (the JobSet API types)."""
    job_template = obj({"metadata": META_LITE, "spec": job_spec(pod_template)})
    depends_on = obj({"name": STRING, "status": enum("Ready", "Complete")}, "name", "status")
    replicated = obj(
        {
            "name": STRING,
            "groupName": STRING,
            "replicas": nonneg(INT32),
            "dependsOn": arr(depends_on, maxItems=1),
            "template": job_template,
        },
        "name",
        "template",
    )
    failure_rule = obj(
        {
            "name": STRING,
            "action": enum(
                "FailJobSet",
                "RestartJobSet",
                "RestartJobSetAndIgnoreMaxRestarts",
                "RestartJob",
                "RestartJobAndIgnoreMaxRestarts",
            ),
            "onJobFailureReasons": arr(STRING),
            "onJobFailureMessagePatterns": arr(STRING),
            "targetReplicatedJobs": arr(STRING),
        },
        "action",
    )
    return obj(
        {
            "replicatedJobs": arr(replicated, minItems=1),
            "network": obj({"enableDNSHostnames": BOOL, "subdomain": STRING, "publishNotReadyAddresses": BOOL}),
            "successPolicy": obj({"operator": enum("All", "Any"), "targetReplicatedJobs": arr(STRING)}, "operator"),
            "failurePolicy": obj(
                {
                    "maxRestarts": nonneg(INT32),
                    "restartStrategy": enum("Recreate", "BlockingRecreate", "InPlaceRestart"),
                    "rules": arr(failure_rule),
                }
            ),
            "startupPolicy": obj({"startupPolicyOrder": enum("AnyOrder", "InOrder")}, "startupPolicyOrder"),
            "suspend": BOOL,
            "coordinator": obj({"replicatedJob": STRING, "jobIndex": INT32, "podIndex": INT32}, "replicatedJob"),
            "managedBy": STRING,
            "ttlSecondsAfterFinished": nonneg(INT32),
        },
        "replicatedJobs",
    )


def resource_flavor_spec(toleration: dict[str, Any]) -> dict[str, Any]:
    """kueue.x-k8s.io/v1beta2 ResourceFlavorSpec (the Kueue API types)."""
    taint = obj(
        {
            "key": STRING,
            "value": STRING,
            "effect": enum("NoSchedule", "PreferNoSchedule", "NoExecute"),
            "timeAdded": STRING,
        },
        "key",
        "effect",
    )
    return obj(
        {
            "nodeLabels": {**STRING_MAP, "maxProperties": 8},
            "nodeTaints": arr(taint, maxItems=8),
            "tolerations": arr(toleration, maxItems=8),
            "topologyName": STRING,
        }
    )


def configmap_schema() -> dict[str, Any]:
    """core/v1 ConfigMap: data (keys: [-._a-zA-Z0-9]+), binaryData, immutable; no spec."""
    key = {"propertyNames": {"pattern": r"^[-._a-zA-Z0-9]+$", "maxLength": 253}}
    return obj(
        {
            "apiVersion": {"type": "string", "enum": ["v1"]},
            "kind": {"type": "string", "enum": ["ConfigMap"]},
            "metadata": {"type": "object"},  # ObjectMeta: checked by trainops.render.validate
            "data": {**STRING_MAP, **key},
            "binaryData": {"type": "object", "additionalProperties": {"type": "string"}, **key},
            "immutable": BOOL,
        },
        "apiVersion",
        "kind",
        "metadata",
    )


def rbac_schema(api_version: str, kind: str) -> dict[str, Any]:
    """core/v1 ServiceAccount, rbac.authorization.k8s.io/v1 Role and RoleBinding: the fields beside
    metadata (they have no spec), from the Kubernetes API reference."""
    fields: dict[str, Any] = {
        "apiVersion": {"type": "string", "enum": [api_version]},
        "kind": {"type": "string", "enum": [kind]},
        "metadata": {"type": "object"},  # ObjectMeta: checked by trainops.render.validate
    }
    required = ["apiVersion", "kind", "metadata"]
    if kind == "ServiceAccount":
        fields["automountServiceAccountToken"] = BOOL
        fields["imagePullSecrets"] = arr(obj({"name": STRING}))
    elif kind == "Role":
        rule = {"apiGroups": arr(STRING), "resources": arr(STRING), "verbs": arr(STRING, minItems=1)}
        fields["rules"] = arr(obj({**rule, "resourceNames": arr(STRING)}, "verbs"))
    else:
        fields["roleRef"] = obj(
            {"apiGroup": STRING, "kind": enum("Role", "ClusterRole"), "name": STRING}, "apiGroup", "kind", "name"
        )
        subject = obj(
            {"kind": enum("ServiceAccount", "User", "Group"), "apiGroup": STRING, "name": STRING, "namespace": STRING},
            "kind",
            "name",
        )
        fields["subjects"] = arr(subject)
        required.append("roleRef")
    return obj(fields, *required)


RBAC = {
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
}


@lru_cache(maxsize=16)
def builtin_validator(api_version: str, kind: str, crds_dir: Path | None) -> Any:
    """A validator for a kind without a CRD in crds_dir, or None when trainops has none."""
    if (api_version, kind) == ("batch/v1", "Job"):
        return make_validator(_root(api_version, kind, job_spec(pod_template_schema(crds_dir)), "spec"))
    if (api_version, kind) == ("apps/v1", "Deployment"):
        return make_validator(_root(api_version, kind, deployment_spec(pod_template_schema(crds_dir)), "spec"))
    if (api_version, kind) == ("v1", "Service"):
        return make_validator(_root(api_version, kind, service_spec()))
    if (api_version, kind) == ("v1", "ConfigMap"):
        return make_validator(configmap_schema())
    if (api_version, kind) in RBAC:
        return make_validator(rbac_schema(api_version, kind))
    if (api_version, kind) == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        return make_validator(_root(api_version, kind, jobset_spec(pod_template_schema(crds_dir)), "spec"))
    if (api_version, kind) == ("scheduling.k8s.io/v1beta1", "Workload"):
        return make_validator(_root(api_version, kind, workload_spec(), "spec"))
    if (api_version, kind) == ("scheduling.k8s.io/v1beta1", "PodGroup"):
        return make_validator(_root(api_version, kind, podgroup_spec(), "spec"))
    if (api_version, kind) == ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"):
        return make_validator(_root(api_version, kind, resource_flavor_spec(toleration_schema(crds_dir))))
    return None


SCOPES = {
    ("batch/v1", "Job"): "Namespaced",
    ("v1", "ConfigMap"): "Namespaced",
    ("apps/v1", "Deployment"): "Namespaced",
    ("v1", "Service"): "Namespaced",
    ("v1", "ServiceAccount"): "Namespaced",
    ("rbac.authorization.k8s.io/v1", "Role"): "Namespaced",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "Namespaced",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "Namespaced",
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "Cluster",
    ("scheduling.k8s.io/v1beta1", "Workload"): "Namespaced",
    ("scheduling.k8s.io/v1beta1", "PodGroup"): "Namespaced",
}
