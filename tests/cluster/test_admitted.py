"""Everything trainops renders is admitted by the real API server (issue 23, item 3).

Every variant of tests/cluster/targets.py (each training scheduler, the cluster topology for
Volcano and Kueue, each serving traffic mode) in every environment of the example: the
training job, the tenants, the eval Job and the serving objects, sent with server-side
apply and fieldValidation=Strict, first as a dry run (what `trainops validate --kubeconfig`
asks) and then for real, into the simulated cluster of tests/kube_cluster.py with the
vendored CRDs of the serving kinds installed. Then the same through the CLI, and refusals
only a server knows (an immutable Topology, a label no node has) located in the manifest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.runner import run
from tests.cluster.targets import FABRIC, manifests, sent, write_variant
from trainops.cluster.client import Cluster, ObjectRefused, connect
from trainops.cluster.dryrun import describe
from trainops.spec import load_manifest

CRDS = Path(__file__).resolve().parents[2] / "trainops" / "render" / "crds"


@pytest.fixture(scope="module")
def cluster(kube_cluster: Any) -> Iterator[Cluster]:
    """A Cluster client on the simulated cluster, with every vendored CRD the cluster lacks installed."""
    with connect(kubeconfig=kube_cluster.kubeconfig) as client:
        missing = []
        for path in sorted(CRDS.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text(encoding="utf-8"))
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
            if not client.served(f"{group}/{version}", kind):
                missing.append(path)
        kube_cluster.install_crds(missing)
        client.rediscover()  # with the new CRDs
        yield client


def _namespaces(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    for namespace in sorted({(o.get("metadata") or {}).get("namespace") for o in objects} - {None}):
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=False)


def test_every_target_in_every_environment_is_admitted_dry_run_then_for_real(cluster: Cluster, tmp_path: Path) -> None:
    refused: list[str] = []
    kinds: set[str] = set()
    stored: dict[tuple[str, str, str | None, str], None] = {}
    kept: set[tuple[str, str, str | None, str]] = set()
    checked = 0
    try:
        for manifest in manifests(tmp_path):
            items = sent(manifest)
            _namespaces(cluster, [i.obj for i in items])
            for dry_run in (True, False):
                for item in items:
                    obj, meta = item.obj, item.obj["metadata"]
                    key = (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
                    if not dry_run and key not in stored and cluster.get(*key[:2], key[3], namespace=key[2]):
                        kept.add(key)  # the cluster's own (its HyperNodes rack-0, …): not ours to delete
                    try:
                        answer = cluster.apply(obj, dry_run=dry_run)
                    except ObjectRefused as err:
                        where = f"{manifest.path.parent.name} env {manifest.env or 'base'}"
                        refused.append(f"{where}: {describe(obj)} ({item.source}, dry run {dry_run}): {err}")
                        continue
                    assert answer["metadata"]["name"] == meta["name"]
                    if not dry_run and key not in kept:
                        stored[key] = None
                    kinds.add(f"{obj['apiVersion']} {obj['kind']}")
                    checked += 1
    finally:  # the session's cluster is shared: its GPUs go back to the other tests
        for api_version, kind, namespace, name in reversed(list(stored)):
            cluster.delete(api_version, kind, name, namespace=namespace)
    assert refused == []
    assert checked > 500
    served = {"apps/v1 Deployment", "v1 Service", "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet"}
    served |= {"argoproj.io/v1alpha1 Rollout", "argoproj.io/v1alpha1 AnalysisTemplate"}
    served |= {"gateway.networking.k8s.io/v1 HTTPRoute", "serving.kserve.io/v1beta1 InferenceService"}
    served |= {"monitoring.coreos.com/v1 ServiceMonitor", "argoproj.io/v1alpha1 Application"}
    served |= {"batch.volcano.sh/v1alpha1 Job", "batch/v1 Job", "jobset.x-k8s.io/v1alpha2 JobSet"}
    served |= {"kubeflow.org/v1 PyTorchJob", "scheduling.volcano.sh/v1beta1 Queue"}
    served |= {"kueue.x-k8s.io/v1beta2 ClusterQueue", "kueue.x-k8s.io/v1beta2 LocalQueue"}
    served |= {"kueue.x-k8s.io/v1beta2 ResourceFlavor", "kueue.x-k8s.io/v1beta2 Topology"}
    served |= {"topology.volcano.sh/v1alpha1 HyperNode"}
    assert served <= kinds


def test_validate_kubeconfig_asks_the_cluster_for_every_environment(
    cluster: Cluster, kube_cluster: Any, tmp_path: Path
) -> None:
    path = write_variant(tmp_path / "v", "volcano-topology")
    out = run("validate", "-f", str(path), "--kubeconfig", str(kube_cluster.kubeconfig))
    assert out.code == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("cluster (")]
    # the Volcano Job and Queue, 3 HyperNodes, the eval Job and its ConfigMap, 8 serving objects
    assert lines[0].startswith("cluster (base): 15 objects sent to https://127.0.0.1:")
    assert [line.split(":")[0] for line in lines] == [
        "cluster (base)",
        "cluster (env dev)",
        "cluster (env dev-strict)",
        "cluster (env dev-signed)",
        "cluster (env slurm-local)",
        "cluster (env prod)",
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
    assert data["cluster"] == [{"env": "prod", "server": kube_cluster.server, "objects": 15, "problems": []}]


def test_a_tier_label_no_node_has_is_an_error_at_its_line(kube_cluster: Any, tmp_path: Path) -> None:
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
