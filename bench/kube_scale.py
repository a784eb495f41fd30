"""Volcano at scale on the simulated cluster: gang binding time, rack placement, throughput.

On kwok nodes × 8 GPUs in racks of 16 under 8 spines (trainops_testing/kube_cluster.py: the upstream
control plane, Volcano 1.15 scheduler and controllers), with jobs rendered by trainops
(examples/tiny-llm's training job, nodes and topology changed):

1. gang: one 512-GPU job (64 pods × 8 GPUs): seconds from apply to all pods bound
   (target: 30 s);
2. topology: 40 jobs of 128 GPUs (16 pods), `networkTopology: hard, highestTierAllowed: 1`,
   applied together: the share placed inside one rack, and the time until all are bound;
3. throughput: N one-node jobs in one queue: jobs bound per second.

Every job is watched throughout: no job may ever stay partially bound (checked at every
poll once the scheduler settles, and at the end). There is no peer to run beside it here:
the point is the figures against the issue's targets. Writes bench/results/kube_scale.json.

    python bench/kube_scale.py              # 1,250 nodes (10,000 GPUs), 78 racks, 8 spines
    python bench/kube_scale.py --quick      # 64 nodes in 4 racks of 16, 2 spines (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.kube_cluster import RACK_LABEL, KubeApi, KubeCluster, Shape  # noqa: E402
from trainops_testing.kube_jobs import apply, render_job, render_tenants  # noqa: E402

NS = "bench"
JOB_LABEL = "volcano.sh/job-name"
VJOB = "batch.volcano.sh/v1alpha1"


@dataclass
class Figures:
    nodes: int
    gpus: int
    racks: int
    spines: int
    cluster_start_s: float = 0.0
    gang_gpus: int = 0
    gang_bound_s: float = 0.0
    topo_jobs: int = 0
    topo_inside_one_rack: int = 0
    topo_all_bound_s: float = 0.0
    queue_jobs: int = 0
    queue_jobs_per_s: float = 0.0
    partial_seen: list[str] = field(default_factory=list)
    load: str = ""
    machine: str = ""


def _pods_by_job(api: KubeApi) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in api.list("v1", "Pod", NS):
        job = pod["metadata"].get("labels", {}).get(JOB_LABEL)
        if job and not pod["metadata"].get("deletionTimestamp"):
            out.setdefault(job, []).append(pod)
    return out


def _watch(api: KubeApi, jobs: dict[str, int], figures: Figures, *, timeout: float) -> dict[str, list[str]]:
    """Poll until every job has all its pods bound; return each job's nodes.

    A job seen partially bound in two polls a second apart is recorded (a gang binds its
    pods in one scheduling cycle: between two polls, never across them for long)."""
    start = time.monotonic()
    partial_since: dict[str, float] = {}
    while True:
        by_job = _pods_by_job(api)
        nodes = {j: [p["spec"]["nodeName"] for p in by_job.get(j, []) if p["spec"].get("nodeName")] for j in jobs}
        now = time.monotonic()
        for job, want in jobs.items():
            if 0 < len(nodes[job]) < want:
                first = partial_since.setdefault(job, now)
                if now - first > 5.0 and job not in figures.partial_seen:
                    figures.partial_seen.append(job)
            else:
                partial_since.pop(job, None)
        if all(len(nodes[j]) == want for j, want in jobs.items()):
            return nodes
        if now - start > timeout:
            done = sum(len(nodes[j]) == w for j, w in jobs.items())
            raise SystemExit(f"kube_scale: only {done}/{len(jobs)} jobs bound after {timeout:.0f}s")
        time.sleep(0.1)  # polling interval


def _delete_jobs(api: KubeApi) -> None:
    for job in api.list(VJOB, "Job", NS):
        api.delete(VJOB, "Job", job["metadata"]["name"], NS)
    deadline = time.monotonic() + 300
    while api.list("v1", "Pod", NS) and time.monotonic() < deadline:
        time.sleep(0.5)  # waiting for kwok to delete the pods


def _render(work: Path, run_id: str, **train: Any) -> list[dict[str, Any]]:
    return render_job(work / run_id, run_id=run_id, namespace=NS, queue=NS, **train)


def gang(api: KubeApi, work: Path, figures: Figures, *, gpus: int) -> None:
    objects = _render(work, "gang", nodes=gpus // 8, topology=None)
    t0 = time.monotonic()
    apply(api, objects)
    name = next(o["metadata"]["name"] for o in objects if o["kind"] == "Job")
    _watch(api, {name: gpus // 8}, figures, timeout=600)
    figures.gang_gpus = gpus
    figures.gang_bound_s = round(time.monotonic() - t0, 2)
    _delete_jobs(api)


def topology(api: KubeApi, cluster: KubeCluster, work: Path, figures: Figures, *, jobs: int) -> None:
    rendered = [_render(work, f"topo-{i:02d}", nodes=16) for i in range(jobs)]  # tiny-llm's: hard, tier 1
    names = {next(o["metadata"]["name"] for o in objs if o["kind"] == "Job"): 16 for objs in rendered}
    t0 = time.monotonic()
    for objs in rendered:
        apply(api, objs)
    placed = _watch(api, names, figures, timeout=900)
    figures.topo_all_bound_s = round(time.monotonic() - t0, 2)
    rack = {n: cluster.node_labels(i)[RACK_LABEL] for i, n in enumerate(cluster.nodes)}
    figures.topo_jobs = jobs
    figures.topo_inside_one_rack = sum(len({rack[n] for n in nodes}) == 1 for nodes in placed.values())
    _delete_jobs(api)


def throughput(api: KubeApi, work: Path, figures: Figures, *, jobs: int) -> None:
    rendered = [_render(work, f"q-{i:03d}", nodes=1, topology=None) for i in range(jobs)]
    names = {next(o["metadata"]["name"] for o in objs if o["kind"] == "Job"): 1 for objs in rendered}
    t0 = time.monotonic()
    for objs in rendered:
        apply(api, objs)
    _watch(api, names, figures, timeout=900)
    figures.queue_jobs = jobs
    figures.queue_jobs_per_s = round(jobs / (time.monotonic() - t0), 2)
    _delete_jobs(api)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 nodes in 4 racks, small jobs (CI)")
    parser.add_argument("--nodes", type=int, help="kwok nodes (default 1,250; 64 with --quick)")
    parser.add_argument("--keep", type=Path, help="cluster directory to keep (logs) instead of a temp dir")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/kube_scale.json")
    args = parser.parse_args()
    load = docresult.Load()
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        print("kube_scale: TRAINOPS_SKIP_KUBE=1: skipped (no simulated cluster on this machine)")
        return 0
    nodes = args.nodes or (64 if args.quick else 1250)
    racks = max(1, nodes // 16)
    shape = Shape(nodes=nodes, gpus_per_node=8, racks=racks, spines=min(8, max(1, racks // 2)))
    figures = Figures(nodes=nodes, gpus=nodes * 8, racks=shape.racks, spines=shape.spines)
    gang_gpus = 128 if args.quick else 512
    topo_jobs = min(40, racks) if not args.quick else 3
    queue_jobs = 20 if args.quick else 200
    with tempfile.TemporaryDirectory(prefix="kube-scale-") as tmp:
        directory = args.keep or Path(tmp) / "cluster"
        cluster = KubeCluster(
            directory, shape=shape, components=("etcd", "apiserver", "controller-manager", "kwok", "volcano")
        )
        t0 = time.monotonic()
        cluster.start()
        try:
            figures.cluster_start_s = round(time.monotonic() - t0, 2)
            work = Path(tmp) / "render"
            tenant = [{"name": NS, "namespaces": [NS], "gpus": {"deserved": nodes * 8, "capability": nodes * 8}}]
            apply(cluster.api, render_tenants(work / "tenants", namespace=NS, queue=NS, tenants=tenant))
            apply(cluster.api, [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": "research-normal"}, "value": 1000}])  # fmt: skip
            gang(cluster.api, work, figures, gpus=gang_gpus)
            topology(cluster.api, cluster, work, figures, jobs=topo_jobs)
            throughput(cluster.api, work, figures, jobs=queue_jobs)
        finally:
            cluster.stop()
    figures.load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    figures.machine = f"{platform.machine()}, {os.cpu_count()} CPUs"
    print(f"cluster: {nodes} nodes, {nodes * 8} GPUs, {shape.racks} racks, {shape.spines} spines; "
          f"up in {figures.cluster_start_s:.1f}s")  # fmt: skip
    print(f"gang: {gang_gpus} GPUs ({gang_gpus // 8} pods) bound {figures.gang_bound_s:.2f}s after apply (target 30s)")
    print(
        f"topology: {figures.topo_inside_one_rack}/{figures.topo_jobs} jobs of 128 GPUs inside one rack; "
        f"all bound in {figures.topo_all_bound_s:.1f}s"
    )
    print(f"throughput: {figures.queue_jobs} one-node jobs from one queue, {figures.queue_jobs_per_s:.1f} jobs/s")
    print(f"partially bound jobs: {len(figures.partial_seen)}; load average {figures.load}")
    if not args.quick:
        out = ROOT / "bench" / "results" / "kube_scale.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    if args.doc and not args.quick:
        write_doc(figures, gang_gpus, load)
    failures = []
    if figures.partial_seen:
        failures.append(f"jobs left partially bound: {figures.partial_seen}")
    if figures.topo_inside_one_rack != figures.topo_jobs:
        failures.append("a topology-constrained job straddles racks")
    for failure in failures:
        print(f"kube_scale: {failure}", file=sys.stderr)
    return 1 if failures else 0


def write_doc(figures: Figures, gang_gpus: int, load: docresult.Load) -> None:
    """The committed results (docs/operations/results/kube_scale.json) the performance page shows."""
    docresult.write(
        docresult.default_path("kube_scale"),
        benchmark="kube_scale",
        title=(
            f"Volcano placing trainops' jobs on {figures.gpus:,} simulated GPUs ({figures.nodes:,} kwok nodes × 8 "
            f"in {figures.racks} racks under {figures.spines} spines)"
        ),
        load=load,
        columns=["what", "measured", "target"],
        rows=[
            ["cluster start (nodes Ready, HyperNodes applied)", f"{figures.cluster_start_s:.0f} s", "—"],
            [
                f"{gang_gpus}-GPU gang job ({gang_gpus // 8} pods): apply to all pods bound",
                f"{figures.gang_bound_s:.1f} s",
                f"≤ 30 s {'✓' if figures.gang_bound_s <= 30 else '✗'}",
            ],
            [
                f"{figures.topo_jobs} jobs of 128 GPUs, `highestTierAllowed: 1`, applied together: inside one rack",
                f"{figures.topo_inside_one_rack} of {figures.topo_jobs} (all bound {figures.topo_all_bound_s:.0f} s "
                "after the first apply)",
                f"all {'✓' if figures.topo_inside_one_rack == figures.topo_jobs else '✗'}",
            ],
            [f"{figures.queue_jobs} one-node jobs from one queue", f"{figures.queue_jobs_per_s:.1f} jobs/s", "—"],
            [
                "jobs seen partially bound (any poll, > 5 s)",
                str(len(figures.partial_seen)),
                f"none {'✓' if not figures.partial_seen else '✗'}",
            ],
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
