"""Restarting a training gang after a pod fails: JobSet's failure policy beside Volcano's.

On the simulated cluster (trainops_testing/kube_cluster.py: the upstream control plane, the
default scheduler, kwok nodes, the JobSet controller with its RestartJob gate, and the Volcano
scheduler and controllers), three jobs of the same size, rendered by trainops from
examples/tiny-llm with only train.scheduler and train.faultTolerance.action changed, each
fail one worker pod (kwok ends it with exit code 1) again and again; each time the figure
is the seconds from the failure to every pod of the job Running again (new pods where the
policy replaces them):

- JobSet, action RestartJob: the JobSet recreates every child Job (the whole gang);
- JobSet, action RestartTask: the JobSet recreates only the failed child Job (the workers);
- Volcano, action RestartJob (the peer): Volcano kills and recreates every pod of the Job.

kwok starts a pod at once, so the figures are the controllers' and the scheduler's share of
a restart (deletion, recreation, scheduling), not image pulls or a trainer's start-up. The
jobs run one after the other on the same nodes; the load average is printed with them.

    python bench/restart.py              # 16-pod jobs, 5 failures each
    python bench/restart.py --quick      # 2-pod jobs (a leader, a worker), 1 failure each (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.kube_cluster import KubeApi, KubeCluster, Shape  # noqa: E402
from trainops_testing.kube_jobs import (  # noqa: E402
    JOB_NAME_LABEL,
    apply,
    fail_pod,
    live_pods,
    priority_class,
    render_job,
    render_tenants,
    running_again,
)
from trainops_testing.services import wait_for  # noqa: E402

NS = "bench"
JOBSET = "jobset.x-k8s.io/v1alpha2"
VJOB = "batch.volcano.sh/v1alpha1"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass
class Case:
    what: str
    scheduler: str
    action: str
    seconds: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.seconds)


def _jobs(api: KubeApi) -> int:
    return len(api.list(JOBSET, "JobSet", NS)) + len(api.list(VJOB, "Job", NS))


def run_case(api: KubeApi, work: Path, case: Case, *, pods: int, failures: int) -> None:
    run_id = f"{case.scheduler}-{case.action.lower()}"
    objects = render_job(
        work / run_id,
        run_id=run_id,
        scheduler=case.scheduler,
        namespace=NS,
        queue=NS,
        nodes=pods,
        topology=None,
        faultTolerance={"maxRetry": failures, "action": case.action, "restartOn": ["PodFailed"]},
    )
    (job,) = [o for o in objects if o["kind"] in ("JobSet", "Job") and o["apiVersion"] in (JOBSET, VJOB)]
    name = job["metadata"]["name"]
    selector = f"{JOBSET_LABEL}={name}" if job["kind"] == "JobSet" else f"{JOB_NAME_LABEL}={name}"
    # what a failure replaces: the whole gang, or (RestartTask on a JobSet) the workers' Job
    replaced = f"{selector},{RJOB_LABEL}=workers" if case.action == "RestartTask" else selector
    apply(api, objects)
    wait_for(
        lambda: running_again(api, NS, selector, pods, old=set()),
        timeout=300,
        what=f"{name}: {pods} pods running",
        interval=0.05,
    )
    for _ in range(failures):
        case.seconds.append(_restart_once(api, name, selector, replaced, pods))
    api.delete(job["apiVersion"], job["kind"], name, NS)
    wait_for(
        lambda: not api.list("v1", "Pod", NS) and not _jobs(api),
        timeout=300,
        what=f"{name} deleted with its pods",
        interval=0.05,
    )


def _restart_once(api: KubeApi, name: str, selector: str, replaced: str, pods: int) -> float:
    """Fail one worker; seconds until the pods the policy replaces are new and every pod runs."""
    old = live_pods(api, NS, replaced)
    uids = {p["metadata"]["uid"] for p in old}
    worker = [p for p in old if "worker" in p["metadata"]["name"]][-1]
    t0 = time.monotonic()
    fail_pod(api, NS, worker)
    wait_for(
        lambda: running_again(api, NS, replaced, len(old), old=uids),
        timeout=300,
        what=f"{name} restarted",
        interval=0.05,
    )
    wait_for(
        lambda: running_again(api, NS, selector, pods, old=set()),
        timeout=300,
        what=f"{name}: all {pods} pods running",
        interval=0.05,
    )
    return round(time.monotonic() - t0, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2-pod jobs, 1 failure each (CI)")
    parser.add_argument("--pods", type=int, help="pods (nodes) per job (default 16; 2 with --quick)")
    parser.add_argument("--failures", type=int, help="failures per job (default 5; 1 with --quick)")
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/restart.json")
    args = parser.parse_args()
    load = docresult.Load()
    if os.environ.get("TRAINOPS_SKIP_KUBE") == "1":
        print("restart: TRAINOPS_SKIP_KUBE=1: skipped (no simulated cluster on this machine)")
        return 0
    pods = args.pods or (2 if args.quick else 16)
    failures = args.failures or (1 if args.quick else 5)
    cases = [
        Case("JobSet, RestartJob: every child Job recreated", "kueue", "RestartJob"),
        Case("JobSet, RestartTask: the failed child Job recreated", "kueue", "RestartTask"),
        Case("Volcano, RestartJob: every pod recreated (peer)", "volcano", "RestartJob"),
    ]
    components = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "volcano", "jobset")
    with tempfile.TemporaryDirectory(prefix="restart-") as tmp:
        cluster = KubeCluster(
            Path(tmp) / "cluster",
            shape=Shape(nodes=pods, racks=1, spines=1),
            components=components,
            hypernodes=False,
            jobset_gates={"RestartJob": True},
        )
        cluster.start()
        try:
            work = Path(tmp) / "render"
            tenant = [{"name": NS, "namespaces": [NS], "gpus": {"deserved": pods * 8, "capability": pods * 8}}]
            apply(cluster.api, render_tenants(work / "tenants", namespace=NS, queue=NS, tenants=tenant))
            apply(cluster.api, [priority_class("research-normal", 1000)])
            for case in cases:
                run_case(cluster.api, work, case, pods=pods, failures=failures)
        finally:
            cluster.stop()
    load.end = os.getloadavg()[0]
    print(f"restart: {pods}-pod jobs, {failures} failures each; {load.text()}")
    for case in cases:
        samples = ", ".join(f"{s:.2f}" for s in case.seconds)
        print(f"  {case.what}: median {case.median():.2f} s ({samples})")
    if not args.quick:
        out = ROOT / "bench" / "results" / "restart.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"pods": pods, "load": load.text(), "cases": [asdict(c) for c in cases]}, indent=2))
    if args.doc and not args.quick:
        docresult.write(
            docresult.default_path("restart"),
            benchmark="restart",
            title=f"A failed pod to every pod of its {pods}-pod job Running again (simulated cluster)",
            load=load,
            columns=["policy", "median", "samples"],
            rows=[[c.what, f"{c.median():.2f} s", ", ".join(f"{s:.2f}" for s in c.seconds) + " s"] for c in cases],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
