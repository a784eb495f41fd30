"""Everything trainops renders is admitted by the real API server (issue 23, item 3).

Every variant of tests/cluster/targets.py (each training scheduler, the cluster topology for
Volcano and Kueue, each serving traffic mode) in every environment of the example: the
training job, the tenants, the eval Job and the serving objects, sent with server-side
apply and fieldValidation=Strict, first as a dry run (what `trainops validate --kubeconfig`
asks) and then for real, into the simulated cluster of trainops_testing/kube_cluster.py with the
vendored CRDs of the serving kinds installed, Volcano's admission webhook among the
admission steps (every Volcano Job stored as rendered, nothing left for it to default). Then the same through the CLI,
and refusals only a server knows (an immutable Topology, a label no node has, a Volcano Job
its webhook refuses) located in the manifest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.targets import FABRIC, manifests, sent, write_variant
from trainops.cluster.access import ClusterAccess
from trainops.cluster.applier import apply_object
from trainops.cluster.client import Cluster, ObjectRefused, connect
from trainops.cluster.dryrun import Sent, describe, queue_pending
from trainops.errors import InputError
from trainops.manifest import load_manifest
from trainops_testing.cli import run
from trainops_testing.kube_jobs import priority_class

CRDS = Path(__file__).resolve().parents[2] / "trainops" / "render" / "crds"
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
VOLCANO_QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
# the example's prod environment submits to the prod cluster's queue `pretrain`, which its
# platform team owns (not one of the pipeline's tenants): the cluster here has it too
PLATFORM_QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "pretrain"},
    "spec": {"weight": 1, "reclaimable": True},
}

# the example's train.priorityClass, an administrator's object that validate --kubeconfig checks for
PRIORITY_CLASS = priority_class("research-normal", 1000)


@pytest.fixture(scope="module")
def cluster(kube_cluster: Any) -> Iterator[Cluster]:
    """A Cluster client on the simulated cluster, with every vendored CRD the cluster lacks installed."""
    with connect(ClusterAccess(str(kube_cluster.kubeconfig))) as client:
        missing = []
        for path in sorted(CRDS.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text(encoding="utf-8"))
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
            if not client.served(f"{group}/{version}", kind):
                missing.append(path)
        kube_cluster.install_crds(missing)
        client.rediscover()  # with the new CRDs
        client.apply(PLATFORM_QUEUE, dry_run=False)
        client.apply(PRIORITY_CLASS, dry_run=False)
        yield client
        client.delete(PLATFORM_QUEUE["apiVersion"], "Queue", "pretrain")
        client.delete(PRIORITY_CLASS["apiVersion"], "PriorityClass", "research-normal")


def _namespaces(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    for namespace in sorted({(o.get("metadata") or {}).get("namespace") for o in objects} - {None}):
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=False)


def _kind(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"], obj["kind"]


def _kept_by_volcano(item: Sent, answer: dict[str, Any]) -> bool:
    """Volcano's mutating webhook fills in what a job leaves unset (its maxRetry when 0, each
    task's minAvailable and maxRetry), and its validating webhook refuses any later change to
    them: trainops renders them, so what the cluster stores is what git holds."""
    rendered, stored = item.obj["spec"], answer["spec"]
    keys = ("minAvailable", "maxRetry", "queue", "schedulerName", "plugins")
    if any(stored.get(key) != rendered.get(key) for key in keys):
        return False
    pairs = zip(rendered["tasks"], stored["tasks"], strict=True)
    return all(s[key] == r[key] for r, s in pairs for key in ("minAvailable", "maxRetry", "replicas"))


def test_every_target_in_every_environment_is_admitted_dry_run_then_for_real(cluster: Cluster, tmp_path: Path) -> None:
    refused: list[str] = []
    kinds: set[str] = set()
    stored: dict[tuple[str, str, str | None, str], None] = {}
    kept: set[tuple[str, str, str | None, str]] = set()
    checked = volcano_jobs = volcano_sent = 0
    try:
        for manifest in manifests(tmp_path):
            # the tenants' Queues first, as Argo CD's stand-in (trainops.cluster.applier) applies them
            items = sorted(sent(manifest), key=lambda i: _kind(i.obj) != VOLCANO_QUEUE)
            queues = {i.obj["metadata"]["name"] for i in items if _kind(i.obj) == VOLCANO_QUEUE}
            volcano_sent += sum(_kind(i.obj) == VOLCANO_JOB for i in items)
            _namespaces(cluster, [i.obj for i in items])
            for dry_run in (True, False):
                for item in items:
                    obj, meta = item.obj, item.obj["metadata"]
                    key = (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
                    if not dry_run and key not in stored and cluster.get(*key[:2], key[3], namespace=key[2]):
                        kept.add(key)  # the cluster's own (its HyperNodes rack-0, …): not ours to delete
                    try:  # for real as the stand-in for Argo CD applies (a Job retried while its Queue opens)
                        answer = (
                            cluster.apply(obj, dry_run=True) if dry_run else apply_object(cluster, obj, queues=queues)
                        )
                    except (ObjectRefused, InputError) as err:
                        if dry_run and queue_pending(item.obj, err.message, queues):
                            continue  # a dry run stores no Queue for its Job to see: asked for real below
                        where = f"{manifest.path.parent.name} env {manifest.env or 'base'}"
                        refused.append(f"{where}: {describe(obj)} ({item.source}, dry run {dry_run}): {err}")
                        continue
                    assert answer["metadata"]["name"] == meta["name"]
                    if _kind(obj) == VOLCANO_JOB:
                        assert _kept_by_volcano(item, answer), describe(obj)
                        volcano_jobs += 1
                    if not dry_run and key not in kept:
                        stored[key] = None
                    kinds.add(f"{obj['apiVersion']} {obj['kind']}")
                    checked += 1
    finally:  # the session's cluster is shared: its GPUs go back to the other tests
        for api_version, kind, namespace, name in reversed(list(stored)):
            cluster.delete(api_version, kind, name, namespace=namespace)
    assert refused == []
    assert checked > 500
    # every Volcano Job (training and eval) for real, and dry run where its queue was there, through the webhook
    assert volcano_sent > 0 and volcano_jobs >= volcano_sent
    served = {"apps/v1 Deployment", "v1 Service", "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet"}
    served |= {"argoproj.io/v1alpha1 Rollout", "argoproj.io/v1alpha1 AnalysisTemplate"}
    served |= {"gateway.networking.k8s.io/v1 HTTPRoute", "serving.kserve.io/v1beta1 InferenceService"}
    served |= {"monitoring.coreos.com/v1 ServiceMonitor", "argoproj.io/v1alpha1 Application"}
    served |= {"batch.volcano.sh/v1alpha1 Job", "batch/v1 Job", "jobset.x-k8s.io/v1alpha2 JobSet"}
    served |= {"kubeflow.org/v1 PyTorchJob", "scheduling.volcano.sh/v1beta1 Queue", "ray.io/v1 RayJob"}
    served |= {"kueue.x-k8s.io/v1beta2 ClusterQueue", "kueue.x-k8s.io/v1beta2 LocalQueue"}
    served |= {"kueue.x-k8s.io/v1beta2 ResourceFlavor", "kueue.x-k8s.io/v1beta2 Topology"}
    served |= {"topology.volcano.sh/v1alpha1 HyperNode"}
    served |= {"trainer.kubeflow.org/v1alpha1 TrainJob", "trainer.kubeflow.org/v1alpha1 TrainingRuntime"}
    assert served <= kinds


def test_validate_kubeconfig_asks_the_cluster_for_every_environment(
    cluster: Cluster, kube_cluster: Any, tmp_path: Path
) -> None:
    path = write_variant(tmp_path / "v", "volcano-topology")
    out = run("validate", "-f", str(path), "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("cluster (")]
    # the Volcano Job and Queue, 3 HyperNodes, the training path's Argo CD Application, the
    # training SLOs' rules, the run's PodMonitor and dashboard, the eval Job and its ConfigMap,
    # 11 serving objects (3 of them spec.slo's)
    assert lines[0].startswith("cluster (base): 22 objects sent to https://127.0.0.1:")
    assert [line.split(":")[0] for line in lines] == [
        "cluster (base)",
        "cluster (env dev)",
        "cluster (env dev-strict)",
        "cluster (env dev-signed)",
        "cluster (env slurm-local)",
        "cluster (env prod)",
        "cluster (env disagg)",
    ]
    assert "refused" not in out.stdout
    data = yaml.safe_load(
        run(
            "validate",
            "-f",
            str(path),
            "--env",
            "prod",
            "--cluster",
            "-o",
            "json",
            env={"KUBECONFIG": str(kube_cluster.kubeconfig)},
        ).stdout
    )
    assert data["ok"] is True
    assert data["cluster"] == [{"env": "prod", "server": kube_cluster.server, "objects": 22, "problems": []}]


def test_a_tier_label_no_node_has_is_an_error_at_its_line(cluster: Cluster, kube_cluster: Any, tmp_path: Path) -> None:
    path = write_variant(tmp_path / "v", "volcano-topology")
    text = path.read_text().replace("nodeLabel: topology.trainops.dev/spine", "nodeLabel: topology.example.com/row")
    path.write_text(text)
    line, column = next(
        (i, row.index("nodeLabel") + 1) for i, row in enumerate(text.splitlines(), 1) if "example.com/row" in row
    )
    out = run("validate", "-f", str(path), "--env", "prod", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 3
    assert out.stderr.splitlines()[-1] == (
        f"Error: {path}:{line}:{column}: spec.cluster.topology.tiers[1].nodeLabel: no node of the cluster "
        f"({len(kube_cluster.nodes)} nodes) has label topology.example.com/row (with --env prod)"
    )


def test_a_refusal_only_the_server_knows_is_located_and_nothing_is_stored(
    cluster: Cluster, kube_cluster: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Kueue's Topology levels are immutable (a CEL rule): changing the tiers of a cluster
    that has the Topology is refused, at spec.cluster.topology.tiers."""
    path = write_variant(tmp_path / "v", "kueue-topology")
    fabric = [i.obj for i in sent(load_manifest(path)) if i.obj["kind"] in ("Topology", "ResourceFlavor")]
    for obj in fabric:
        cluster.apply(obj, dry_run=False)
    request.addfinalizer(lambda: [cluster.delete(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in fabric])
    data = yaml.safe_load(path.read_text())
    data["spec"]["cluster"]["topology"]["tiers"] = [FABRIC["tiers"][0]]
    data["spec"]["cluster"]["topology"]["domains"] = {"rack-0": {}, "rack-1": {}}
    data["spec"]["train"]["topology"]["highestTierAllowed"] = 1
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if row.strip() == "tiers:")
    out = run("validate", "-f", str(path), "--env", "prod", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 3, out.stderr
    error = out.stderr.splitlines()[-1]
    assert error.startswith(f"Error: {path}:{line}:")
    assert "spec.cluster.topology.tiers: the cluster refuses Topology gpu-fabric (cluster/kueue-topology.yaml)" in error
    assert "immutable" in error
    stored = cluster.get("kueue.x-k8s.io/v1beta2", "Topology", "gpu-fabric")
    assert stored is not None and len(stored["spec"]["levels"]) == 2  # the dry run stored nothing


def _refusals(out: Any) -> list[str]:
    """validate's lines for the objects the cluster refuses (the serving kinds whose
    controllers this cluster lacks aside)."""
    return [line for line in out.stderr.splitlines() if "the cluster refuses Job" in line]


def test_a_volcano_job_its_webhook_refuses_is_one_line_at_the_patch_that_made_it(
    cluster: Cluster, kube_cluster: Any, tmp_path: Path
) -> None:
    """Volcano's validating webhook refuses a job whose minAvailable is more than its pods (here
    set by a spec.patches entry): one line naming the Job and the patch's field; nothing stored."""
    path = write_variant(tmp_path / "v", "volcano")
    data = yaml.safe_load(path.read_text())
    patch = {"target": {"kind": "Job", "name": "tiny-llm-validate"}, "merge": {"spec": {"minAvailable": 9999}}}
    data["spec"]["patches"].append(patch)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    index = len(data["spec"]["patches"]) - 1
    line, column = next(
        (i, row.index("minAvailable") + 1)
        for i, row in enumerate(path.read_text().splitlines(), 1)
        if "minAvailable: 9999" in row
    )
    out = run("validate", "--render", "-f", str(path), "--env", "prod", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 3, out.stderr
    assert _refusals(out) == [  # a single problem is validate's error line
        f"Error: {path}:{line}:{column}: spec.patches[{index}].merge.spec.minAvailable: the cluster refuses Job "
        'tiny-llm/tiny-llm-validate (train/volcano-job.yaml): admission webhook "validatejob.volcano.sh" denied '
        "the request: job 'minAvailable' should not be greater than total replicas in tasks; (with --env prod)"
    ]
    assert cluster.get(*VOLCANO_JOB, "tiny-llm-validate", namespace="tiny-llm") is None


def test_a_volcano_job_for_a_queue_the_cluster_lacks_is_refused_at_train_queue(
    cluster: Cluster, kube_cluster: Any, tmp_path: Path
) -> None:
    """A queue that is neither in the cluster nor one of the tenants (whose Queues a dry run
    does not store, so a Job for one of them is not refused): one line at train.queue."""
    path = write_variant(tmp_path / "v", "volcano")
    data = yaml.safe_load(path.read_text())
    data["environments"]["prod"]["train"]["queue"] = "no-such-queue"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    line, column = next(
        (i, row.index("queue") + 1) for i, row in enumerate(path.read_text().splitlines(), 1) if "no-such-queue" in row
    )
    out = run("validate", "--render", "-f", str(path), "--env", "prod", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 3, out.stderr
    denied = (
        'admission webhook "validatejob.volcano.sh" denied the request: unable to find job queue: '
        'queue.scheduling.volcano.sh "no-such-queue" not found; (with --env prod)'
    )
    assert _refusals(out) == [
        f"{path}:{line}:{column}: spec.train.queue: the cluster refuses Job tiny-llm/{name} ({source}): {denied}"
        for name, source in (
            ("tiny-llm-validate", "train/volcano-job.yaml"),
            ("tiny-llm-eval-validate", "eval/volcano-job.yaml"),
        )
    ]
    assert cluster.get(*VOLCANO_JOB, "tiny-llm-validate", namespace="tiny-llm") is None
