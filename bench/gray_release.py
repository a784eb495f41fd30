"""Gray release through the real controllers: how long a promote takes to reach the HTTPRoute,
and a failing metric to abort the canary.

On the simulated cluster (trainops_testing/kube_cluster.py: etcd, API server, controller-manager,
scheduler, kwok) with Argo CD (repo-server, application-controller, redis) syncing the
GitOps repo over git's HTTP transport and Argo Rollouts with the Gateway API plugin
(trainops_testing/argo_cluster.py), and Debian's Prometheus scraping one vLLM-named exporter per serving
ReplicaSet (trainops_testing/serving_metrics.py, a stand-in: kwok pods serve nothing):

1. **promote → weight**: from `trainops rollout promote` returning (the commit pushed) to
   the new canary weight on the HTTPRoute, read from the API server; through Argo CD
   (git polled every 2 s here; a real installation polls every 3 minutes or takes a
   webhook) and Argo Rollouts.
2. **peer, same step without git**: the same Rollout object applied straight to the API
   server with kubectl (what `kubectl apply` from CI would do), to the same weight: the
   controller's own share of the time.
3. **failing metric → abort**: a canary step whose AnalysisRun measures every 2 s; while it
   runs the canary's time to first token is raised over the threshold; from that moment to
   the Rollout's `status.abort`.

    python bench/gray_release.py            # 5 promotes per mode, 3 aborts
    python bench/gray_release.py --quick    # 1 of each (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.argo_live import NAME, NAMESPACE, Live, serving_overlay, start_args  # noqa: E402
from trainops_testing.projects import make_project  # noqa: E402

SERVING = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
SLOW, FAST = 2.0, 0.05
TIMEOUT = 180.0


@dataclass
class Result:
    promotes: int
    promote_to_weight_s: list[float]
    peer_apply_to_weight_s: list[float]
    metric_to_abort_s: list[float]
    median_promote_s: float
    median_peer_s: float
    median_abort_s: float | None
    load_before: float
    load_after: float


def _wait(probe: Callable[[], Any], what: str) -> float:
    """Seconds until probe() is truthy (polled every 0.1 s), else SystemExit naming `what`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT:
        try:
            if probe():
                return time.monotonic() - t0
        except Exception:  # a probe of a cluster still catching up: not yet
            pass
        time.sleep(0.1)  # pacing between reads of the API server
    raise SystemExit(f"gray_release: timed out waiting for {what}")


def _trainops(project: Any, *args: str) -> None:
    cmd = [sys.executable, "-m", "trainops.cli.main", *project.cli(*args)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"gray_release: trainops {' '.join(args)}: {done.stderr.strip()}")


def _canary_weight(live: Live) -> int | None:
    return live.weights().get(f"{NAME}-canary")


def _bootstrap(project: Any, live: Live) -> None:
    _trainops(project, *start_args("v1"))
    live.bootstrap(project)
    _wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy")


def _promotes(project: Any, live: Live, rounds: int) -> list[float]:
    """start v2, then promote to 50% and measure; back to 25% by abort + start, `rounds` times."""
    times = []
    for _ in range(rounds):
        _trainops(project, *start_args("v2"))
        _wait(lambda: _canary_weight(live) == 25, "the first step's 25%")
        t0 = time.monotonic()
        _trainops(project, "rollout", "promote")
        _wait(lambda: _canary_weight(live) == 50, "50% after promote")
        times.append(time.monotonic() - t0)
        _trainops(project, "rollout", "abort")
        _wait(lambda: _canary_weight(live) == 0 and not live.rollout()["spec"]["strategy"]["canary"]["steps"], "abort")
        _wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy after abort")
    return times


def _peer(live: Live, rounds: int) -> list[float]:
    """The same step change applied straight to the API server (no git, no Argo CD)."""
    # Argo CD's automated sync (selfHeal) would put git's Rollout back over a direct change:
    # the peer is measured with it off, as a user applying with kubectl would run, then on again.
    app = live.app()
    name, automated = app["metadata"]["name"], (app["spec"].get("syncPolicy") or {}).get("automated")
    _sync_policy(live, name, None)
    try:
        return _patched_weights(live, rounds)
    finally:
        _sync_policy(live, name, automated)


def _sync_policy(live: Live, app: str, automated: Any) -> None:
    patch = json.dumps({"spec": {"syncPolicy": {"automated": automated}}})
    live.argo.kubectl_run("patch", "-n", "argocd", f"application/{app}", "--type=merge", "-p", patch)


def _patched_weights(live: Live, rounds: int) -> list[float]:
    times = []
    for weight in [30, 40, 30, 40, 30][:rounds] if rounds > 1 else [30]:
        ro = live.rollout()
        steps = ro["spec"]["strategy"]["canary"]["steps"]
        held = next(s["setWeight"] for s in steps if "setWeight" in s)
        patched = [{"setWeight": held}, {"setWeight": weight}] + [s for s in steps if "setWeight" not in s]
        patch = json.dumps({"spec": {"strategy": {"canary": {"steps": patched}}}})
        t0 = time.monotonic()
        live.argo.kubectl_run("patch", "-n", NAMESPACE, f"rollout/{NAME}", "--type=merge", "-p", patch)
        _wait(lambda w=weight: _canary_weight(live) == w, f"{weight}% after a direct patch")  # type: ignore[misc]
        times.append(time.monotonic() - t0)
    return times


def _aborts(project: Any, live: Live, exporters: Any, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        exporters.slow = False
        _trainops(project, *start_args("v2"))
        _wait(lambda: live.get("analysisruns")["items"] and _running(live), "the step's AnalysisRun running")
        exporters.slow = True
        t0 = time.monotonic()
        _wait(lambda: (live.rollout().get("status") or {}).get("abort"), "the controller's abort")
        times.append(time.monotonic() - t0)
        exporters.slow = False
        _trainops(project, "rollout", "abort")
        _wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy after abort")
    return times


def _running(live: Live) -> bool:
    runs = live.get("analysisruns")["items"]
    latest = max(runs, key=lambda r: r["metadata"]["creationTimestamp"])
    return bool((latest.get("status") or {}).get("phase") == "Running")


class _Latency:
    """The exporters' time to first token: the canary's is SLOW while `slow` is set."""

    slow = False

    def __call__(self, release: str) -> float:
        return SLOW if self.slow and "model:v2@" in release else FAST


def run(rounds: int, work: Path) -> Result:
    from trainops_testing.argo_cluster import ArgoStack
    from trainops_testing.kube_bins import binary
    from trainops_testing.kube_cluster import KubeCluster
    from trainops_testing.prometheus import Prometheus
    from trainops_testing.serving_metrics import ReplicaSetExporters

    load_before = os.getloadavg()[0]
    cluster = KubeCluster(work / "kube", components=SERVING)
    cluster.start()
    stack = ArgoStack(work=work / "argo", kubeconfig=cluster.kubeconfig, kubectl=str(binary("kubectl")))
    prometheus = Prometheus(work / "prometheus", file_sd=True)
    latency = _Latency()
    try:
        stack.start()
        prometheus.start()
        overlay = serving_overlay(stack.new_repo("gitops.git"), prometheus=prometheus.url)
        overlay["spec"]["rollout"]["analysis"]["count"] = 60  # measures for 2 minutes: the slow-down lands mid-run
        project = make_project(work / "project", overlay)
        live = Live(stack)
        exporters = ReplicaSetExporters(
            get=live.get, prometheus=prometheus, rollout=NAME, namespace=NAMESPACE, latency_for=latency
        ).start()
        try:
            _bootstrap(project, live)
            promote = _promotes(project, live, rounds)
            _trainops(project, *start_args("v2"))
            _wait(lambda: _canary_weight(live) == 25, "the first step's 25%")
            peer = _peer(live, rounds)
            _trainops(project, "rollout", "abort")
            _wait(lambda: (live.rollout().get("status") or {}).get("phase") == "Healthy", "v1 Healthy")
            aborts = _aborts(project, live, latency, max(1, rounds // 2))
        finally:
            exporters.stop()
    finally:
        prometheus.stop()
        stack.stop()
        cluster.stop()
    return Result(
        promotes=rounds,
        promote_to_weight_s=[round(t, 2) for t in promote],
        peer_apply_to_weight_s=[round(t, 2) for t in peer],
        metric_to_abort_s=[round(t, 2) for t in aborts],
        median_promote_s=round(statistics.median(promote), 2),
        median_peer_s=round(statistics.median(peer), 2),
        median_abort_s=round(statistics.median(aborts), 2) if aborts else None,
        load_before=round(load_before, 2),
        load_after=round(os.getloadavg()[0], 2),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one promote, one peer patch, one abort (CI)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/gray_release.json")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    for name, value in {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost"}.items():
        os.environ.setdefault(name, value)
        os.environ.setdefault(name.replace("AUTHOR", "COMMITTER"), value)
    with tempfile.TemporaryDirectory(prefix="gray-release-") as tmp:
        os.environ["HOME"] = str(Path(tmp) / "home")
        result = run(rounds, Path(tmp))
    text = json.dumps(asdict(result), indent=2)
    print(text)
    if not args.quick:
        out = ROOT / "bench" / "results" / "gray_release.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(
        f"promote → weight {result.median_promote_s:.1f} s through git + Argo CD + Argo Rollouts "
        f"(direct apply {result.median_peer_s:.1f} s); failing metric → abort {result.median_abort_s} s; "
        f"load {result.load_before} → {result.load_after}",
        file=sys.stderr,
    )
    if args.doc and not args.quick:
        abort = f"{result.median_abort_s:.1f} s" if result.median_abort_s is not None else "—"
        docresult.write(
            docresult.default_path("gray_release"),
            benchmark="gray_release",
            title=f"A promote through Argo CD and Argo Rollouts; a failing metric to the abort (median of {rounds})",
            load=docresult.Load.between(result.load_before, result.load_after),
            columns=["step", "median"],
            rows=[
                [
                    "`rollout promote` to the new weight on the HTTPRoute, through git, Argo CD (polling every 2 s) "
                    "and Argo Rollouts",
                    f"{result.median_promote_s:.1f} s",
                ],
                ["the same step patched straight into the Rollout", f"{result.median_peer_s:.1f} s"],
                ["the canary's time to first token over the threshold to the controller's abort", abort],
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
