"""The serving half of the flow on the simulated cluster, with the real controllers.

Starts the simulated cluster (tests/kube_cluster.py: etcd, API server, controller-manager,
scheduler, kwok nodes), Argo CD (repo-server, application-controller, redis) and Argo
Rollouts with the Gateway API plugin (tests/argo_cluster.py), and a GitOps repository served
over git's HTTP transport on loopback. Then, with trainops only: v1 is served as stable, the
Application trainops rendered is applied once (what a user does), and v2 is walked through
its canary steps to stable; after every commit the script waits for the controllers and
prints `trainops rollout status --kubeconfig` (read from the cluster). Everything stops at
the end. Run through scripts/cluster-job.sh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tests.argo.helpers import NAME, Live, serving_overlay, start_args  # noqa: E402
from tests.serve.conftest import make_project  # noqa: E402

SERVING = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
TIMEOUT = 180.0


def wait(probe: Callable[[], Any], what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT:
        try:
            if probe():
                print(f"   ... {what} after {time.monotonic() - t0:.1f} s", flush=True)
                return
        except Exception:  # the cluster is still catching up
            pass
        time.sleep(0.2)  # pacing between reads of the API server
    raise SystemExit(f"cluster-job: timed out waiting for {what}")


def trainops(project: Any, *args: str) -> None:
    print(f"$ trainops {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, "-m", "trainops.cli.main", *project.cli(*args)], check=True)


def main() -> int:
    from argo_cluster import ArgoStack
    from kube_bins import binary
    from kube_cluster import KubeCluster

    with tempfile.TemporaryDirectory(prefix="cluster-job-") as tmp:
        work = Path(tmp)
        os.environ["HOME"] = str(work / "home")
        for name in ("GIT_AUTHOR", "GIT_COMMITTER"):
            os.environ.setdefault(f"{name}_NAME", "cluster-job")
            os.environ.setdefault(f"{name}_EMAIL", "cluster-job@localhost")
        cluster = KubeCluster(work / "kube", components=SERVING)
        print("== the simulated cluster, Argo CD and Argo Rollouts", flush=True)
        cluster.start()
        stack = ArgoStack(work=work / "argo", kubeconfig=cluster.kubeconfig, kubectl=str(binary("kubectl")))
        try:
            stack.start()
            project = make_project(work / "project", serving_overlay(stack.new_repo("gitops.git")))
            live = Live(stack)
            status = ("rollout", "status", "--kubeconfig", str(cluster.kubeconfig))
            canary = f"{NAME}-canary"

            print("== v1, the first release: stable at once; the Application applied once", flush=True)
            trainops(project, *start_args("v1"))
            live.bootstrap(project)
            wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy")
            trainops(project, *status)

            print("== v2 as a canary: each step a commit, Argo CD syncs, Argo Rollouts moves the route", flush=True)
            trainops(project, *start_args("v2"))
            wait(lambda: live.weights().get(canary) == 25 and live.header_routes(), "25% and the A/B header route")
            trainops(project, *status)
            trainops(project, "rollout", "promote")
            wait(lambda: live.weights().get(canary) == 50, "50%")
            trainops(project, *status)
            trainops(project, "rollout", "promote", "--full")
            wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy"
                 and not live.header_routes(), "v2 stable, the header route gone")  # fmt: skip
            trainops(project, *status)
        finally:
            stack.stop()
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
