"""The whole flow on the simulated cluster, with the real controllers.

Starts the simulated cluster (trainops_testing/kube_cluster.py: etcd, API server, controller-manager,
scheduler, kwok GPU nodes, the Volcano scheduler and controllers), Argo CD (repo-server,
application-controller, redis) and Argo Rollouts with the Gateway API plugin
(trainops_testing/argo_cluster.py), and a GitOps repository served over git's HTTP transport on
loopback. Then, as a user and their CI would (trainops_testing/argo_push.py):

1. the project's bare git remote gets a `post-receive` hook that runs `trainops ci` for the
   pushed range; a change of spec.train is `git push`ed; ci commits the Volcano job and the
   training path's Argo CD Application to the GitOps repo;
2. the Application is applied once; Argo CD syncs the training path; the Volcano scheduler
   binds every pod of the gang, each on its own node (read from the API server, and shown
   by `trainops train status --kubeconfig`);
3. v1 is served as stable and v2 walked through its canary steps to stable, each step a
   trainops commit that Argo CD syncs and Argo Rollouts carries out.

kwok's pods run nothing, so ci's train stage waits for checkpoints that never come: the
script stops it at the end with everything else it started. Any failure exits 1, naming
what it waited for. Run it through scripts/cluster-job.sh.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]

from trainops_testing.argo_live import NAME, Live, start_args  # noqa: E402
from trainops_testing.argo_push import (  # noqa: E402
    TRAIN_APP,
    PushProject,
    all_bound,
    app_status,
    bootstrap_train,
    change_training,
    gitops_commit,
    gitops_file,
    priority_class,
    push_project,
    volcano_jobs,
)

COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "volcano")
TIMEOUT = 240.0
T = TypeVar("T")


class Failed(Exception):
    """A step that did not happen: the script says which and exits 1."""


def wait(probe: Callable[[], T | None], what: str) -> T:
    t0 = time.monotonic()
    last: Exception | None = None
    while time.monotonic() - t0 < TIMEOUT:
        try:
            value = probe()
        except Exception as err:  # the cluster is still catching up
            last, value = err, None
        if value:
            print(f"   ... {what} after {time.monotonic() - t0:.1f} s", flush=True)
            return value
        time.sleep(0.2)  # pacing between reads of the API server
    raise Failed(f"timed out after {TIMEOUT:.0f} s waiting for {what}" + (f" (last: {last})" if last else ""))


def trainops(project: PushProject, *args: str) -> None:
    print(f"$ trainops {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, "-m", "trainops.cli.main", *project.cli(*args)], check=False)
    if done.returncode != 0:
        raise Failed(f"trainops {' '.join(args)} exited {done.returncode}")


def train_on_push(project: PushProject, stack: Any, kubeconfig: Path, gitops: str, work: Path) -> None:
    """A push runs ci; Argo CD syncs the training path; Volcano binds the gang."""
    new = change_training(project, steps=400)
    print(f"$ git push origin main   # {new[:12]}: train 400 steps", flush=True)
    print(project.push(), flush=True)
    scratch = work / "gitops-view"
    application = wait(lambda: gitops_file(gitops, TRAIN_APP, scratch=scratch), "ci's GitOps commit of the job")
    commit, trailers = gitops_commit(scratch)
    print(f"   GitOps commit {commit[:12]}: run {trailers.get('Trainops-Run')} of {trailers.get('Trainops-Commit')}")
    print(
        f"   ci's log so far ({project.runs}):\n"
        + "".join(f"     {line}\n" for line in project.ci_log(new).splitlines())
    )
    print(f"== the training path's Application, applied once ({TRAIN_APP})", flush=True)
    app = bootstrap_train(stack, application)
    status = wait(lambda: (s := app_status(stack, app)).get("sync", {}).get("status") == "Synced" and s,
                  f"Argo CD: {app} Synced")  # fmt: skip
    if status["sync"].get("revision") != commit:
        raise Failed(f"{app} synced {status['sync'].get('revision')}, not ci's commit {commit}")
    jobs = wait(lambda: volcano_jobs(stack), "the Volcano job in the cluster")
    ((job, _),) = jobs.items()
    pods = wait(lambda: all_bound(stack, job, 2), f"Volcano: every pod of {job} bound")
    for pod, node in sorted(pods.items()):
        print(f"   {pod} -> {node}")
    if len(set(pods.values())) != len(pods):
        raise Failed(f"the gang shares a node: {pods}")
    trainops(project, "train", "status", "--kubeconfig", str(kubeconfig))


def canary(project: PushProject, stack: Any, kubeconfig: Path) -> None:
    """v1 stable, then v2's canary walked to stable, each step a commit."""
    live = Live(stack)
    status = ("rollout", "status", "--kubeconfig", str(kubeconfig))
    weight = f"{NAME}-canary"
    print("== v1, the first release: stable at once; the serving Application applied once", flush=True)
    trainops(project, *start_args("v1"))
    live.bootstrap(project)  # type: ignore[arg-type]  # it reads .root and .manifest only
    wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy")
    trainops(project, *status)
    print("== v2 as a canary: each step a commit, Argo CD syncs, Argo Rollouts moves the route", flush=True)
    trainops(project, *start_args("v2"))
    wait(lambda: live.weights().get(weight) == 25 and live.header_routes(), "25% and the A/B header route")
    trainops(project, *status)
    trainops(project, "rollout", "promote")
    wait(lambda: live.weights().get(weight) == 50, "50%")
    trainops(project, *status)
    trainops(project, "rollout", "promote", "--full")
    wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy"
         and not live.header_routes(), "v2 stable, the header route gone")  # fmt: skip
    trainops(project, *status)


def main() -> int:
    from trainops_testing.argo_cluster import ArgoStack
    from trainops_testing.kube_bins import binary
    from trainops_testing.kube_cluster import KubeCluster
    from trainops_testing.services import ServiceError

    with tempfile.TemporaryDirectory(prefix="cluster-job-") as tmp:
        work = Path(tmp)
        os.environ["HOME"] = str(work / "home")
        cluster = KubeCluster(work / "kube", components=COMPONENTS)
        stack = ArgoStack(work=work / "argo", kubeconfig=cluster.kubeconfig, kubectl=str(binary("kubectl")))
        project: PushProject | None = None
        try:
            print("== the simulated cluster (kwok GPU nodes, Volcano), Argo CD and Argo Rollouts", flush=True)
            cluster.start()
            stack.start()
            os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
            gitops = stack.new_repo("gitops.git")
            print(f"== the project, its git remote with a post-receive hook running `trainops ci` ({work})")
            project = push_project(work, gitops=gitops)
            priority_class(stack)  # the job's PriorityClass: the cluster administrator's
            train_on_push(project, stack, cluster.kubeconfig, gitops, work)
            canary(project, stack, cluster.kubeconfig)
        except (Failed, ServiceError, RuntimeError, OSError) as err:
            print(f"cluster-job: FAILED: {err}", file=sys.stderr, flush=True)
            for log in sorted(project.runs.glob("ci-*.log")) if project is not None else []:
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
            print(f"--- the controllers' logs\n{stack.logs(15)}", file=sys.stderr)
            return 1
        finally:
            if project is not None:
                project.stop_ci()
            stack.stop()
            cluster.stop()
    print("cluster-job: done: a push trained on Volcano through Argo CD; v2 walked to stable", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
