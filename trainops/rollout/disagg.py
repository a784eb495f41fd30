"""Disaggregated serving (rollout.disaggregation): each release a prefill+decode pair behind its own
InferencePool, the HTTPRoute splitting traffic between the stable pair's pool and the canary's.

Per track (stable, and canary while one is under way):
- the pair: a LeaderWorkerSet DisaggregatedSet `<name>-<track>` with roles prefill and decode
  (rollout.disaggregation.slices copies of both; with `placement` each slice inside one domain of
  the tier, slices in distinct domains), or with workload leader-worker-sets a LeaderWorkerSet
  per role, `<name>-<track>-prefill` and `-decode` (replicas × slices each);
- every pod labelled with its role (`llm-d.ai/role`, which the P/D endpoint picker filters on)
  and the pair's revision (`trainops.dev/revision`, one value for both roles of a release);
- an InferencePool `<name>-<track>` selecting the track's pods of that revision, whose endpoint
  picker is the Deployment and Service `<name>-<track>-epp`, scheduling prefill then decode;
- a headless Service `<name>-<track>` over the same pods (both roles), which routes nothing: it
  is what the SLO ServiceMonitor scrapes (trainops.slo.render), so every series of the pair says
  its track (`service="<name>-<track>"`, as in the gateway-api tree) and its pool (`role`).
The HTTPRoute's backends are the pools (group inference.networking.k8s.io), weighted like the
gateway-api Services: the canary pool takes the canary step's weight, A/B matches go to it whole.

`check_pairs` refuses a tree where one pool's selector reaches pods of two revisions (a prefill
of one release and a decode of another) or misses a role.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from trainops.errors import InputError, ManifestError
from trainops.manifest.disagg import LABEL_ROLE, ROLES, Disaggregation, EndpointPicker
from trainops.manifest.load import field_problem
from trainops.manifest.serving import RolloutSpec
from trainops.rollout.context import LABEL_TRACK, ServeContext
from trainops.rollout.engine import nodes_per_replica
from trainops.rollout.routes import canary_weight, header_matches, http_route
from trainops.rollout.state import RolloutState, Served
from trainops.rollout.workload import LWS_GROUP_KEY, leader_worker_set, resources, service

LABEL_REVISION = "trainops.dev/revision"
POOL_API = "inference.networking.k8s.io/v1"
DS_API = "disaggregatedset.x-k8s.io/v1"
DS_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
_AT = ("spec", "rollout", "disaggregation")
_PAIR_KINDS = ("InferencePool", "DisaggregatedSet", "LeaderWorkerSet")


def revision(served: Served) -> str:
    """The pair's revision: the model's digest and the serving image's, shortened (a label value)."""
    model = served.digest.split(":", 1)[1][:12]
    image = served.image.rsplit("@sha256:", 1)[1][:8] if "@sha256:" in served.image else ""
    return f"{model}-{image or hashlib.sha256(served.image.encode()).hexdigest()[:8]}"


def _spec(ctx: ServeContext) -> Disaggregation:
    d = ctx.rollout.disaggregation
    assert d is not None
    return d


def _picker(ctx: ServeContext) -> EndpointPicker:
    picker = _spec(ctx).endpoint_picker
    assert picker is not None  # the manifest's checks require it unless KServe runs the picker
    return picker


def _role_flags(rollout: RolloutSpec, d: Disaggregation, role: str) -> list[str]:
    size = getattr(d, role)
    if rollout.engine == "vllm":
        kv_role = (
            "kv_both" if d.connector == "NixlConnector" else ("kv_producer" if role == "prefill" else "kv_consumer")
        )
        flags = [
            "--kv-transfer-config",
            json.dumps({"kv_connector": d.connector, "kv_role": kv_role}, separators=(",", ":")),
        ]
        if size.data_parallel > 1:
            flags += ["--data-parallel-size", str(size.data_parallel)]
        return flags
    flags = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", d.connector]
    if size.data_parallel > 1:
        flags += ["--dp-size", str(size.data_parallel)]
    return flags


def role_context(ctx: ServeContext, role: str) -> ServeContext:
    """The serving context of one role: its engine size and flags in place of rollout's."""
    d = _spec(ctx)
    size = getattr(d, role)
    rollout = ctx.rollout.model_copy(
        update={
            "replicas": size.replicas,
            "gpus_per_replica": size.gpus_per_replica,
            "tensor_parallel": size.tensor_parallel,
            "pipeline_parallel": 1,
            "engine_args": [*ctx.rollout.engine_args, *_role_flags(ctx.rollout, d, role), *size.engine_args],
        }
    )
    return ServeContext(ctx.manifest, rollout, ctx.warnings)


def _pair_labels(ctx: ServeContext, served: Served, track: str, role: str) -> dict[str, str]:
    return {**ctx.labels(track), LABEL_ROLE: role, LABEL_REVISION: revision(served)}


def _role_set(ctx: ServeContext, served: Served, *, name: str, track: str, role: str) -> dict[str, Any]:
    """The LeaderWorkerSet of one role (the DisaggregatedSet's role spec is its spec)."""
    rctx = role_context(ctx, role)
    lws = leader_worker_set(rctx, served, name=name, track=track)
    template = lws["spec"]["leaderWorkerTemplate"]
    labels = _pair_labels(ctx, served, track, role)
    for key in ("leaderTemplate", "workerTemplate"):
        pod = template[key]
        pod["metadata"]["labels"].update(labels)
        # no two pods of one group on a node: the group's own pods, whatever the set's generated name
        term = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        term["labelSelector"] = {"matchLabels": {**ctx.selector(track), LABEL_ROLE: role}}
        term["matchLabelKeys"] = [LWS_GROUP_KEY]
    if nodes_per_replica(rctx.rollout) == 1:  # one pod a group: the leader's template is the only one
        template["workerTemplate"] = template.pop("leaderTemplate")
    lws["metadata"]["labels"].update(labels)
    return lws


def pair_objects(ctx: ServeContext, served: Served, track: str) -> list[dict[str, Any]]:
    """The workload of one release's pair, its InferencePool and the pool's endpoint picker."""
    d = _spec(ctx)
    name = f"{ctx.name}-{track}"
    objects: list[dict[str, Any]] = []
    if d.workload == "llm-inference-service":
        return [llm_inference_service(ctx, served, track)]
    if d.workload == "disaggregated-set":
        roles = []
        for role in ROLES:
            lws = _role_set(ctx, served, name=f"{name}-{role}", track=track, role=role)
            roles.append({"name": role, "metadata": {"labels": lws["metadata"]["labels"]}, "spec": lws["spec"]})
        spec: dict[str, Any] = {"slices": d.slices, "roles": roles}
        if d.placement is not None:
            spec["placementPolicy"] = {"type": "ExclusiveTopology", "topology": _tier_label(ctx, d.placement)}
        meta = ctx.metadata(name, track=track, labels={LABEL_REVISION: revision(served)})
        objects.append({"apiVersion": DS_API, "kind": "DisaggregatedSet", "metadata": meta, "spec": spec})
    else:
        for role in ROLES:
            lws = _role_set(ctx, served, name=f"{name}-{role}", track=track, role=role)
            lws["spec"]["replicas"] *= d.slices
            objects.append(lws)
    objects.append(pool(ctx, served, track))
    objects.append(track_service(ctx, served, track))
    objects += endpoint_picker(ctx, track)
    return objects


def track_service(ctx: ServeContext, served: Served, track: str) -> dict[str, Any]:
    """The headless Service of a track's pair, the SLO ServiceMonitor's way to its pods."""
    selector = {**ctx.selector(track), LABEL_REVISION: revision(served)}
    svc = service(ctx, name=f"{ctx.name}-{track}", selector=selector, track=track)
    svc["metadata"]["labels"][LABEL_REVISION] = revision(served)
    svc["spec"] = {"clusterIP": "None", **svc["spec"]}
    return svc


def _tier_label(ctx: ServeContext, tier: str) -> str:
    cluster = ctx.manifest.pipeline.spec.cluster
    fabric = cluster.topology if cluster is not None else None
    assert fabric is not None  # the manifest's checks refuse a placement without the tier
    return next(t.node_label for t in fabric.tiers if t.name == tier)


def pool(ctx: ServeContext, served: Served, track: str) -> dict[str, Any]:
    name = f"{ctx.name}-{track}"
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": ctx.metadata(name, track=track, labels={LABEL_REVISION: revision(served)}),
        "spec": {
            "selector": {"matchLabels": {**ctx.selector(track), LABEL_REVISION: revision(served)}},
            "targetPorts": [{"number": ctx.rollout.port}],
            "endpointPickerRef": {
                "name": f"{name}-epp",
                "port": {"number": _picker(ctx).port},
                "failureMode": "FailClose",
            },
        },
    }


def picker_config() -> str:
    """The endpoint picker's scheduling: prefill by the prefill pods, then decode by the decode pods."""
    plugins = [
        {"type": "prefill-header-handler"},
        {"type": "prefill-filter"},
        {"type": "decode-filter"},
        {"type": "queue-scorer"},
        {"type": "max-score-picker"},
        {"type": "pd-profile-handler", "parameters": {"threshold": 0}},
    ]
    profiles = [
        {
            "name": role,
            "plugins": [
                {"pluginRef": f"{role}-filter"},
                {"pluginRef": "queue-scorer"},
                {"pluginRef": "max-score-picker"},
            ],
        }
        for role in ROLES
    ]
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }
    return json.dumps(config, separators=(",", ":"))


def picker_args(ctx: ServeContext, track: str) -> list[str]:
    picker = _picker(ctx)
    args = ["--pool-name", f"{ctx.name}-{track}"]
    if ctx.namespace:
        args += ["--pool-namespace", ctx.namespace]
    args += ["--grpc-port", str(picker.port), "--grpc-health-port", str(EPP_HEALTH_PORT)]
    return [*args, "--metrics-port", str(EPP_METRICS_PORT), "--config-text", picker_config()]


def endpoint_picker(ctx: ServeContext, track: str) -> list[dict[str, Any]]:
    """The pool's endpoint picker: a Deployment and the Service the Gateway reaches it by."""
    picker = _picker(ctx)
    name = f"{ctx.name}-{track}-epp"
    selector = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "endpoint-picker"}
    labels = {**ctx.labels(track), **selector}
    probe = {"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}, "periodSeconds": 10}
    container = {
        "name": "epp",
        "image": picker.image,
        "imagePullPolicy": "IfNotPresent",
        "args": picker_args(ctx, track),
        "ports": [
            {"name": "grpc", "containerPort": picker.port, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": probe,
        "livenessProbe": probe,
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {"serviceAccountName": name, "containers": [container]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": ctx.metadata(name, track=track, labels=selector),
        "spec": {
            "replicas": picker.replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    ports = [{"name": "grpc", "port": picker.port, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "http2"}]
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name, track=track, labels=selector),
        "spec": {"selector": selector, "ports": ports},
    }
    return [deployment, svc, *_picker_access(ctx, track, name, selector)]


def _picker_access(ctx: ServeContext, track: str, name: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """What the picker reads in its namespace: the serving pods it picks from, its pool and the
    pool's objectives (a ServiceAccount, a Role, the RoleBinding between them)."""
    read = ["get", "list", "watch"]
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": read},
        {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
        {"apiGroups": ["inference.networking.x-k8s.io"], "resources": ["inferenceobjectives"], "verbs": read},
    ]

    def meta() -> dict[str, object]:  # a fresh dict for each object
        return ctx.metadata(name, track=track, labels=labels)

    rbac = "rbac.authorization.k8s.io/v1"
    subject = {"kind": "ServiceAccount", "name": name, **({"namespace": ctx.namespace} if ctx.namespace else {})}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()},
        {"apiVersion": rbac, "kind": "Role", "metadata": meta(), "rules": rules},
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject],
        },
    ]


# -- KServe's LLMInferenceService -------------------------------------------------------------------

KSERVE_API = "serving.kserve.io/v1alpha2"
KSERVE_POOL_SUFFIX = "-inference-pool"  # the InferencePool KServe makes for an LLMInferenceService


def kserve_name(ctx: ServeContext, served: Served) -> str:
    """One LLMInferenceService per release, named by its revision: a promote never updates a
    service in place (KServe would roll its prefill and decode Deployments one after the other)."""
    name = f"{ctx.name}-{hashlib.sha256(revision(served).encode()).hexdigest()[:10]}"
    if len(name + KSERVE_POOL_SUFFIX) > 63:
        raise InputError(
            f"the pipeline name {ctx.pipeline} is too long for KServe's pool name ({name}{KSERVE_POOL_SUFFIX})",
            hint="use a pipeline name of at most 36 characters with workload llm-inference-service",
        )
    return name


def _kserve_role(ctx: ServeContext, served: Served, role: str, replicas: int) -> dict[str, Any]:
    """A role of an LLMInferenceService: KServe's vLLM preset runs `vllm serve /mnt/models` and
    appends the container's args (the connector, data parallelism, the engine flags)."""
    d = _spec(ctx)
    size = getattr(d, role)
    args = list(_role_flags(ctx.rollout, d, role))
    if ctx.rollout.max_model_len is not None:
        args += ["--max-model-len", str(ctx.rollout.max_model_len)]
    args += [*ctx.rollout.engine_args, *size.engine_args]
    gpus = resources(role_context(ctx, role), size.gpus_per_replica)
    container = {"name": "main", "image": served.image, "args": args, "resources": gpus}
    parallelism = {"tensor": size.tensor_parallel, "data": size.data_parallel}
    return {"replicas": replicas, "parallelism": parallelism, "template": {"containers": [container]}}


def llm_inference_service(ctx: ServeContext, served: Served, track: str) -> dict[str, Any]:
    d = _spec(ctx)
    if served.release.startswith("file://"):
        ctx.warn(
            "the release is in a file:// registry, which KServe's storage initializer cannot read: "
            "serve from oci:// or s3://"
        )
    # the pods' labels name the release, not the track: a promote relabels the service, not its pods
    labels = {**ctx.labels(), LABEL_REVISION: revision(served)}
    spec: dict[str, Any] = {
        "model": {"uri": served.release, "name": ctx.rollout.served_name(ctx.pipeline)},
        "labels": labels,  # on every pod KServe makes
        **_kserve_role(ctx, served, "decode", d.decode.replicas * d.slices),
        "prefill": {**_kserve_role(ctx, served, "prefill", d.prefill.replicas * d.slices), "labels": labels},
        # KServe makes the pool and its picker; the route is trainops' (it weights the releases' pools)
        "router": {"scheduler": {}, "route": {"http": {"refs": [{"name": ctx.name}]}}},
    }
    meta = ctx.metadata(kserve_name(ctx, served), track=track, labels={LABEL_REVISION: revision(served)})
    return {"apiVersion": KSERVE_API, "kind": "LLMInferenceService", "metadata": meta, "spec": spec}


def pool_backend(ctx: ServeContext, state: RolloutState, track: str, weight: int) -> dict[str, Any]:
    """The route's backend of a track's pool: trainops' `<name>-<track>`, or KServe's of the release."""
    name = f"{ctx.name}-{track}"
    if _spec(ctx).workload == "llm-inference-service":
        served = state.canary if track == "canary" else (state.stable or state.canary)
        assert served is not None
        name = kserve_name(ctx, served) + KSERVE_POOL_SUFFIX
    return {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": name, "weight": weight}


# -- a release is a pair ------------------------------------------------------------------------


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a DisaggregatedSet's roles or of a LeaderWorkerSet."""
    if obj["kind"] == "DisaggregatedSet":
        specs = [role.get("spec", {}) for role in obj["spec"].get("roles", [])]
    elif obj["kind"] == "LeaderWorkerSet":
        specs = [obj["spec"]]
    else:
        return []
    out = []
    for spec in specs:
        lwt = spec.get("leaderWorkerTemplate", {})
        out += [lwt[k] for k in ("leaderTemplate", "workerTemplate") if isinstance(lwt.get(k), dict)]
    return out


def check_pairs(ctx: ServeContext, objects: list[dict[str, Any]]) -> None:
    """Every InferencePool reaches the prefill and the decode pods of exactly one revision (the
    served pair), or ManifestError: one line at rollout.disaggregation."""

    pods = [t.get("metadata", {}).get("labels", {}) for obj in objects for t in pod_templates(obj)]
    for pool_obj in (o for o in objects if o["kind"] == "InferencePool"):
        selector = pool_obj["spec"].get("selector", {}).get("matchLabels", {})
        reached = [labels for labels in pods if all(labels.get(k) == v for k, v in selector.items())]
        revisions = sorted({labels.get(LABEL_REVISION, "none") for labels in reached})
        roles = {labels.get(LABEL_ROLE) for labels in reached}
        name = pool_obj["metadata"]["name"]
        problem = None
        if len(revisions) > 1:
            tracks = sorted({labels.get(LABEL_TRACK, "?") for labels in reached})
            problem = (
                f"InferencePool {name} reaches pods of {len(revisions)} revisions ({', '.join(revisions)}; tracks "
                f"{', '.join(tracks)}): a prefill of one release could hand its KV cache to a decode of another; "
                f"its selector must name one revision ({LABEL_REVISION})"
            )
        elif roles != set(ROLES):
            missing = ", ".join(r for r in ROLES if r not in roles)
            problem = f"InferencePool {name} reaches no {missing} pods: a release serves as a prefill+decode pair"
        if problem is not None:
            manifest = ctx.manifest
            patches = manifest.pipeline.spec.patches
            loc: tuple[str | int, ...] = next(
                (
                    ("spec", "patches", i)
                    for i, p in enumerate(patches)
                    if p.target.kind in _PAIR_KINDS
                    and (p.target.name is None or p.target.name == name or p.target.name.startswith(f"{name}-"))
                ),
                _AT,
            )  # the patch that changed the pool or its pair, else the section that made them
            raise ManifestError([field_problem(manifest.path, env=manifest.env, loc=loc, message=problem)])


def disaggregated(ctx: ServeContext, state: RolloutState) -> list[dict[str, Any]]:
    """The objects of rollout.traffic gateway-api with rollout.disaggregation (see the module)."""

    stable = state.stable or state.canary
    if stable is None:
        raise InputError("nothing is served: start a rollout with a release first")
    objects = pair_objects(ctx, stable, "stable")
    rules: list[dict[str, Any]] = []
    if state.canary is not None and state.stable is not None:
        weight = canary_weight(ctx, state)
        objects += pair_objects(ctx, state.canary, "canary")
        if ctx.rollout.ab_test is not None:
            rules.append({"matches": header_matches(ctx), "backendRefs": [pool_backend(ctx, state, "canary", 1)]})
        rules.append(
            {
                "backendRefs": [
                    pool_backend(ctx, state, "stable", 100 - weight),
                    pool_backend(ctx, state, "canary", weight),
                ]
            }
        )
    else:
        rules.append({"backendRefs": [pool_backend(ctx, state, "stable", 100)]})
    objects.append(http_route(ctx, rules))
    return objects
