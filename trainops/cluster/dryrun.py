"""Ask a cluster whether it would take what trainops renders: server-side apply, dry run.

`rendered_objects(manifest)` is what `validate --render` checks offline (the training job
and tenants with a placeholder image, the cluster topology, the eval Job for a placeholder
checkpoint, and with spec.rollout the serving objects as stable and as a canary);
`dry_run` sends each object to the
API server with `dryRun=All&fieldValidation=Strict` (nothing is stored), and the pod templates
inside custom resources (a LeaderWorkerSet's) as Pods, which the server validates in full. Every refusal
becomes a Problem at the line of the manifest field the object came from (spec.train,
spec.tenants[i], spec.cluster.topology, spec.rollout; narrowed by the field the server
names, such as resources or nodeSelector, or an admission webhook quotes, such as Volcano's
'minAvailable'; a spec.patches entry when one set that field), its message naming the object
and the server's words. `topology_problems` checks spec.cluster.topology against the nodes: a tier label no
node has, a rack no node is in; `priority_problems` a train.priorityClass the cluster lacks;
`gang_problems` (trainops.cluster.gangfit) a gang of more nodes than the cluster has;
`trainops.cluster.controllers` the controller, CRD or runtime a target needs that it lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import Cluster, ObjectRefused, connect
from trainops.cluster.controllers import controller_problems, needs_group, trainjob_pod
from trainops.cluster.gangfit import gang_problems
from trainops.errors import NotFoundError, Problem, TrainopsError
from trainops.manifest import Manifest, load_manifest
from trainops.manifest.load import field_problem
from trainops.render.evaljob import EvalJobInput, eval_objects
from trainops.render.image import pin_image

# a field the API server names → the train.* field it is rendered from
_TRAIN_FIELDS = (
    ("networkTopology", "topology"),
    ("priorityClassName", "priorityClass"),
    ("nodeSelector", "nodeSelector"),
    ("tolerations", "tolerations"),
    ("serviceAccountName", "serviceAccount"),
    ("resources", "resources"),
    ("env", "env"),
    ("command", "command"),
    ("image", "image"),
    ("queue", "queue"),
    ("minAvailable", "nodes"),
    ("replicas", "nodes"),
    ("failurePolicy", "faultTolerance"),
)
_EVAL_FROM_TRAIN = (("priorityClassName", "priorityClass"), ("queue", "queue"))
_FIELDS_OF: dict[tuple[str | int, ...], tuple[tuple[str, str], ...]] = {
    ("spec", "train"): _TRAIN_FIELDS,
    ("spec", "eval"): _EVAL_FROM_TRAIN,
}
# Volcano's job admission webhook joins its findings with ";" and quotes the fields it names
_DENIED = "denied the request:"
_QUOTED_FIELD = re.compile(r"'([A-Za-z]+)'")
_VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
_VOLCANO_QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
_TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
_TRAINING_RUNTIME = ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
# its findings on a queue that does not exist yet, or exists but is not yet opened
_QUEUE_PENDING = (
    'unable to find job queue: queue.scheduling.volcano.sh "{}" not found',
    "can only submit job to queue with state `Open`, queue `{}` status is ``",
)


@dataclass(frozen=True)
class Sent:
    """One rendered object, the file it is in, and the manifest field it comes from."""

    obj: dict[str, Any]
    source: str
    loc: tuple[str | int, ...]


def describe(obj: dict[str, Any]) -> str:
    """Kind namespace/name (or Kind name for a cluster-scoped object)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
    return f"{obj.get('kind')} {name}"


def _origin(manifest: Manifest, obj: dict[str, Any], source: str) -> tuple[str | int, ...]:
    """The manifest field an object is rendered from."""
    kind, name = obj.get("kind"), (obj.get("metadata") or {}).get("name")
    top = source.split("/", 1)[0]
    if top == "train":
        return ("spec", "train")
    if top == "tenants":
        names = [t.name for t in manifest.pipeline.spec.tenants]
        return ("spec", "tenants", names.index(name)) if name in names else ("spec", "tenants")
    if top == "cluster":
        part = {"HyperNode": "domains", "Topology": "tiers", "ResourceFlavor": "nodeLabels"}.get(str(kind))
        return ("spec", "cluster", "topology", part) if part else ("spec", "cluster", "topology")
    if top == "eval":
        return ("spec", "eval")
    return ("spec", "rollout")


def rendered_objects(manifest: Manifest) -> list[Sent]:
    """The training job, tenants and eval Job `validate --render` checks offline for this
    manifest (one environment); the serving objects are trainops.rollout.check.serving_sent."""
    from trainops.render.api import render_for_check  # lazy: loads subprocess

    spec = manifest.pipeline.spec
    sent: list[Sent] = []
    if spec.train is None or spec.train.scheduler != "local":
        rendered = render_for_check(manifest)
        sent += [Sent(o, s, _origin(manifest, o, s)) for o, s in zip(rendered.objects, rendered.sources, strict=True)]
    if spec.eval is not None and spec.train is not None and spec.train.scheduler not in ("local", "slurm"):
        sent += _eval(manifest)
    return sent


def _eval(manifest: Manifest) -> list[Sent]:
    """The eval Job (and its manifest ConfigMap) for a placeholder checkpoint and image."""
    from trainops.render.api import PLACEHOLDER_DIGEST, placeholder_image  # lazy: loads subprocess

    pipeline = manifest.pipeline
    assert pipeline.spec.train is not None and pipeline.spec.eval is not None
    checkpoint = "oci://" + placeholder_image(manifest, image="checkpoints:placeholder", digest=PLACEHOLDER_DIGEST)
    job = EvalJobInput(
        pipeline=pipeline.metadata.name,
        run_id="validate",
        env=manifest.env,
        manifest_text=manifest.path.read_text(encoding="utf-8"),
        checkpoint=checkpoint,
        image=pin_image(placeholder_image(manifest), field="image"),
        spec=pipeline.spec,
        train=pipeline.spec.train,
        eval=pipeline.spec.eval,
        user_labels=dict(pipeline.metadata.labels),
    )
    return [Sent(obj, source, ("spec", "eval")) for source, obj in eval_objects(job)]


def _narrow(loc: tuple[str | int, ...], causes: Iterable[str]) -> tuple[str | int, ...]:
    """spec.train → spec.train.resources when the server names a resources field; the eval
    Job's queue and priority class are spec.train's too."""
    fields = _FIELDS_OF.get(loc, ())
    for cause in causes:
        parts = cause.replace("[", ".").replace("]", "").split(".")
        for rendered, field in fields:
            if rendered in parts:
                return ("spec", "train", field)
    return loc


def webhook_findings(message: str) -> list[str]:
    """What an admission webhook's denial says, finding by finding
    (`admission webhook "NAME" denied the request: one; two;`); [] for other refusals."""
    _, marker, findings = message.partition(_DENIED)
    return [part.strip() for part in findings.split(";") if part.strip()] if marker else []


def _named_fields(err: TrainopsError) -> list[str]:
    """The fields a refusal names: the server's causes, else the fields a webhook quotes
    (Volcano: 'minAvailable', 'replicas') and its job queue."""
    if isinstance(err, ObjectRefused) and err.causes:
        return [c.field for c in err.causes]
    names = []
    for finding in webhook_findings(err.message):
        names += _QUOTED_FIELD.findall(finding)
        if "job queue" in finding or finding.startswith(("can only submit job", "can not submit job to root")):
            names.append("queue")
    return names


# what to do about a refusal that names a controller's feature gate the cluster runs without
_GATE_ADVICE = (
    (
        "when RestartJob feature gate is disabled",
        "RestartTask recreates only the failed child Job, which the JobSet controller does behind its RestartJob "
        "feature gate: have the cluster's administrator set featureGates: {RestartJob: true} in the JobSet "
        "controller's Configuration, or use faultTolerance.action RestartJob (the whole gang restarts)",
    ),
)


def _keys(tree: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The key paths of a patch's merge mapping, depth first."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield (*path, str(key))
            yield from _keys(value, (*path, str(key)))


def _patched(manifest: Manifest, obj: dict[str, Any], names: Sequence[str]) -> tuple[str | int, ...] | None:
    """spec.patches[i].merge.<path> when a patch applied to `obj` sets a field the refusal names."""
    name = (obj.get("metadata") or {}).get("name")
    for index, patch in enumerate(manifest.pipeline.spec.patches):
        if patch.target.kind != obj.get("kind") or patch.target.name not in (None, name):
            continue
        for path in _keys(patch.merge):
            if path[-1] in names:
                return ("spec", "patches", index, "merge", *path)
    return None


def refusal_problem(manifest: Manifest, item: Sent, err: TrainopsError) -> Problem:
    """A refusal as a Problem at the manifest line the object comes from: a patch that set
    the field the refusal names, else the field it is rendered from."""
    names = _named_fields(err)
    if "failure policy" in err.message:  # JobSet's webhook on failurePolicy rules names no field
        names.append("failurePolicy")
    loc = _patched(manifest, item.obj, names) or _narrow(item.loc, names)
    message = f"the cluster refuses {describe(item.obj)} ({item.source}): {err}"
    message += "".join(f"; {advice}" for words, advice in _GATE_ADVICE if words in err.message)
    return field_problem(manifest.path, env=manifest.env, loc=loc, message=message)


def _kind(obj: dict[str, Any]) -> tuple[Any, Any]:
    return obj.get("apiVersion"), obj.get("kind")


def queue_pending(obj: dict[str, Any], message: str, queues: set[str]) -> bool:
    """Is `message` Volcano's webhook refusing the Job `obj` only because its queue, one of
    `queues` (committed with it), is not there yet: not found (a dry run stores nothing, so
    the Job cannot see the Queue sent beside it), or just made and not yet opened by
    Volcano's controller? The Job is admitted once the Queue is Open; any other finding
    beside those is a refusal."""
    queue = (obj.get("spec") or {}).get("queue")
    if _kind(obj) != _VOLCANO_JOB or queue not in queues:
        return False
    findings = webhook_findings(message)
    return bool(findings) and set(findings) <= {f.format(queue) for f in _QUEUE_PENDING}


def runtime_pending(obj: dict[str, Any], message: str, runtimes: set[str]) -> bool:
    """Is `message` the Trainer's webhook refusing the TrainJob `obj` only because its
    TrainingRuntime, one of `runtimes` (sent with it and admitted), is not stored: a dry run
    stores nothing. The webhook looks the runtime up after the API server checked the
    TrainJob against its schema, and refuses at the first finding: this one alone."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    if _kind(obj) != _TRAINJOB or ref.get("kind") != "TrainingRuntime" or ref.get("name") not in runtimes:
        return False
    missing = f'TrainingRuntime.trainer.kubeflow.org "{ref["name"]}" not found'
    return _DENIED in message and missing in message and message.count("Invalid value") == 1


def _namespace_field(item: Sent) -> tuple[str | int, ...]:
    """The manifest field that names an object's namespace."""
    if item.loc[:2] in (("spec", "train"), ("spec", "eval")):
        return ("spec", "train", "namespace")
    if item.obj.get("kind") == "Application":
        return ("spec", "gitops", "argocd", "namespace")
    if item.loc[:2] == ("spec", "tenants"):
        return (*item.loc, "namespaces")
    return (*item.loc[:2], "namespace")


def missing_namespaces(cluster: Cluster, manifest: Manifest, items: Sequence[Sent]) -> tuple[list[Problem], set[str]]:
    """One Problem per namespace the objects go to that the cluster lacks (not one per object)."""
    problems, missing = [], set()
    for namespace in sorted({str(i.obj["metadata"]["namespace"]) for i in items if i.obj["metadata"].get("namespace")}):
        if cluster.get("v1", "Namespace", namespace) is not None:
            continue
        missing.add(namespace)
        mine = [i for i in items if i.obj["metadata"].get("namespace") == namespace]
        text = (
            f"namespace {namespace} does not exist in the cluster ({len(mine)} object{'' if len(mine) == 1 else 's'} "
            f"go there, such as {describe(mine[0].obj)}): create it, or let the GitOps controller create it"
        )
        problems.append(field_problem(manifest.path, env=manifest.env, loc=_namespace_field(mine[0]), message=text))
    return problems, missing


def dry_run(cluster: Cluster, manifest: Manifest, items: Sequence[Sent]) -> list[Problem]:
    """Server-side apply of every object with dryRun=All; a Problem per refusal (nothing stored),
    and one per missing namespace instead of one per object in it. The pod templates of custom
    resources the server admitted are sent too, as Pods (see _POD_TEMPLATES). A Volcano Job
    refused only for want of a Queue sent with it (and admitted) is no problem (`queue_pending`),
    nor a TrainJob refused only for want of its TrainingRuntime sent with it (`runtime_pending`)."""
    problems, missing = missing_namespaces(cluster, manifest, items)
    refused: list[tuple[Sent, TrainopsError]] = []
    admitted: set[str] = set()  # names of the Queues and TrainingRuntimes admitted
    for item in items:
        if item.obj["metadata"].get("namespace") in missing:
            continue
        try:
            cluster.apply(item.obj, dry_run=True)
        except (ObjectRefused, NotFoundError) as refusal:
            refused.append((item, refusal))
            continue
        if _kind(item.obj) in (_VOLCANO_QUEUE, _TRAINING_RUNTIME):
            admitted.add(str(item.obj["metadata"]["name"]))
        problems += _template_refusals(cluster, manifest, item, items)
    for item, err in refused:
        if runtime_pending(item.obj, err.message, admitted):
            problems += _template_refusals(cluster, manifest, item, items)
        elif not queue_pending(item.obj, err.message, admitted):
            problems.append(refusal_problem(manifest, item, err))
    return problems


# Pod templates inside custom resources: the API server checks them against the CRD's schema
# only, and the pods are validated when the controller creates them (GPU requests unequal to
# their limits show up later as a StatefulSet that cannot create its pods). A dry-run Pod of
# each template asks now.
_POD_TEMPLATES: dict[str, tuple[tuple[str | int, ...], ...]] = {
    "LeaderWorkerSet": (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
    "RayJob": (
        ("spec", "rayClusterSpec", "headGroupSpec", "template"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
        ("spec", "submitterPodTemplate"),
    ),
}


def _template_pods(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(the template's field, a Pod made of it) for each pod template of a custom resource."""
    meta = obj["metadata"]
    out = []
    for path in _POD_TEMPLATES.get(str(obj.get("kind")), ()):
        template: Any = obj
        for key in path:
            if isinstance(key, int):
                template = template[key] if isinstance(template, list) and len(template) > key else None
            else:
                template = template.get(key) if isinstance(template, dict) else None
        if not isinstance(template, dict):
            continue
        part = next(str(key) for key in reversed(path) if isinstance(key, str) and key != "template").lower()
        pod_meta = {**(template.get("metadata") or {}), "name": f"{meta['name']}-{part}"}
        if meta.get("namespace"):
            pod_meta["namespace"] = meta["namespace"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}
        out.append((".".join(str(key) for key in path), pod))
    return out


def _template_refusals(cluster: Cluster, manifest: Manifest, item: Sent, items: Sequence[Sent]) -> list[Problem]:
    problems = []
    pods = _template_pods(item.obj)
    if _kind(item.obj) == _TRAINJOB:  # its pods are its runtime's template, filled in by the TrainJob
        pod = trainjob_pod(item.obj, [i.obj for i in items])
        pods += [("runtime's node template", pod)] if pod is not None else []
    for field, pod in pods:
        try:
            cluster.apply(pod, dry_run=True)
        except (ObjectRefused, NotFoundError) as err:
            message = f"the cluster refuses the pods of {describe(item.obj)} ({item.source}) from its {field}: {err}"
            problems.append(field_problem(manifest.path, env=manifest.env, loc=item.loc, message=message))
    return problems


def topology_problems(cluster: Cluster, manifest: Manifest) -> list[Problem]:
    """spec.cluster.topology against the nodes: every tier label, flavor label, and rack is on some node."""
    spec = manifest.pipeline.spec
    fabric = spec.cluster.topology if spec.cluster is not None else None
    if fabric is None:
        return []
    nodes = cluster.list("v1", "Node")
    labels = [(n.get("metadata") or {}).get("labels") or {} for n in nodes]
    base = ("spec", "cluster", "topology")
    problems = []

    def problem(loc: tuple[str | int, ...], text: str) -> None:
        problems.append(field_problem(manifest.path, env=manifest.env, loc=(*base, *loc), message=text))

    for i, tier in enumerate(fabric.tiers):
        if not any(tier.node_label in node for node in labels):
            problem(
                ("tiers", i, "nodeLabel"), f"no node of the cluster ({len(nodes)} nodes) has label {tier.node_label}"
            )
    for key, value in fabric.node_labels.items():
        if not any(node.get(key) == value for node in labels):
            problem(("nodeLabels", key), f"no node of the cluster has label {key}={value}")
    if fabric.domains:
        label = fabric.tiers[0].node_label
        for path, domain in _lowest(fabric.domains, len(fabric.tiers)):
            if not any(node.get(label) == domain for node in labels):
                problem(("domains", *path), f"no node of the cluster has {label}={domain}")
    return problems


def priority_problems(cluster: Cluster, manifest: Manifest) -> list[Problem]:
    """train.priorityClass names a PriorityClass the cluster must have: without it the API
    server refuses the job's pods (their priorityClassName), and Kueue, which takes the
    Workload's priority from it, makes no Workload at all — the job would wait, suspended,
    saying nothing. A dry run of the job cannot see this (its pods are a controller's)."""
    train = manifest.pipeline.spec.train
    if train is None or not train.priority_class or train.scheduler in ("slurm", "local"):
        return []
    if cluster.get("scheduling.k8s.io/v1", "PriorityClass", train.priority_class) is not None:
        return []
    effect = (
        "Kueue makes no Workload for the job, which stays suspended"
        if train.scheduler == "kueue"
        else "the API server refuses the job's pods"
    )
    text = (
        f"the cluster has no PriorityClass {train.priority_class} (scheduling.k8s.io/v1), so {effect}: "
        "have it created (a cluster-wide object, an administrator's), or name one the cluster has"
    )
    return [field_problem(manifest.path, env=manifest.env, loc=("spec", "train", "priorityClass"), message=text)]


def _lowest(tree: dict[str, Any], depth: int) -> list[tuple[tuple[str, ...], str]]:
    """(path, name) of every tier-1 domain of a domains tree `depth` deep."""
    out: list[tuple[tuple[str, ...], str]] = []
    for key, sub in tree.items():
        if depth == 1:
            out.append(((key,), key))
        else:
            out += [((key, *path), name) for path, name in _lowest(sub or {}, depth - 1)]
    return out


@dataclass(frozen=True)
class ClusterCheck:
    """What one cluster said of one target (the base spec or an environment)."""

    env: str | None
    server: str
    objects: int  # objects sent (dry run)
    problems: list[Problem]


def check_against_cluster(
    path: Path,
    *,
    targets: Sequence[str | None],
    access: ClusterAccess,
    render: Callable[[Manifest], list[Sent]] = rendered_objects,
) -> list[ClusterCheck]:
    """For each target: what `render` makes of it dry-run applied, and its topology checked
    against the nodes (trainops.pipeline.validate passes the serving objects in too)."""

    checks = []
    with connect(access) as cluster:
        for target in targets:
            manifest = load_manifest(path, env=target)
            try:
                items = render(manifest)
            except TrainopsError:
                items = []  # what cannot render is reported by the offline render check (check_render)
            problems = topology_problems(cluster, manifest) + priority_problems(cluster, manifest)
            lacking = controller_problems(cluster, manifest)
            if lacking:  # said once, at the field, rather than once per object of its kinds
                group = needs_group(manifest)
                items = [i for i in items if str(i.obj.get("apiVersion", "")).split("/")[0] != group]
            problems += gang_problems(cluster, manifest)
            problems += lacking + dry_run(cluster, manifest, items)
            checks.append(ClusterCheck(target, cluster.server, len(items), problems))
    return checks
