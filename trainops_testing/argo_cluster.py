"""Argo CD and Argo Rollouts on the simulated cluster, as real processes on loopback.

Beside a running API server (the simulated cluster's kubeconfig) this starts

* Debian's `redis-server` (Argo CD's cache),
* git's smart HTTP transport (`trainops_testing/githttp.py`) serving the GitOps repositories,
* Argo CD's repo-server and application-controller (the multi-call `argocd` binary,
  `ARGOCD_BINARY_NAME` picks the role; the in-cluster destination is this kubeconfig),
* the Argo Rollouts controller, with the Gateway API traffic-router plugin loaded from a
  local file named in its ConfigMap (no download at start),

after installing their CRDs (upstream's files at the pinned versions, vendored in
tests/upstream/) and the objects they expect: the `argocd` and `argo-rollouts` namespaces,
`argocd-cm`, `argocd-secret`, the `default` AppProject, `argo-rollouts-config`.

Binaries come from `scripts/kube_components.py argocd rollouts` under
${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}; a missing one is MissingDependency with
that command. Argo CD re-reads git every `resync` seconds (its repo-server's revision cache
expires as fast), where a real installation waits three minutes or a webhook.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainops_testing.kube_bins import binary as kube_binary
from trainops_testing.kube_bins import upstream
from trainops_testing.services import (
    LOOPBACK,
    ServiceError,
    _http_status,
    _ManagedProcess,
    free_port,
    require,
    wait_for,
)

ARGOCD_NAMESPACE = "argocd"
ROLLOUTS_NAMESPACE = "argo-rollouts"
PLUGIN_NAME = "argoproj-labs/gatewayAPI"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def upstream_crds(component: str) -> list[Path]:
    """The CRDs of Argo CD or Argo Rollouts at the pinned version (manifests/crds/*-crd.yaml, vendored)."""
    return sorted((upstream(component) / "manifests" / "crds").glob("*-crd.yaml"))


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((LOOPBACK, port)) == 0


class _Proc(_ManagedProcess):
    """One controller process: a command, an environment, a readiness probe."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        super().__init__(log_path)

    def run(
        self, cmd: Sequence[str], *, env: Mapping[str, str], ready: str | int, timeout: float, cwd: Path | None = None
    ) -> None:
        old = Path.cwd()
        if cwd is not None:
            os.chdir(cwd)  # Popen inherits it: Argo Rollouts keeps its plugins under ./plugin-bin
        try:
            self._spawn(cmd, env=env)
        finally:
            os.chdir(old)
        t0 = time.monotonic()
        probe = (lambda: _http_status(ready) == 200) if isinstance(ready, str) else (lambda: _port_open(int(ready)))
        wait_for(probe, timeout=timeout, what=self.name, proc=self.proc, log_path=self.log_path, interval=0.2)
        self.startup_seconds = time.monotonic() - t0


class ArgoStack:
    """Argo CD (repo-server, application-controller, redis), git over HTTP and Argo Rollouts."""

    def __init__(
        self,
        *,
        work: Path,
        kubeconfig: Path,
        kubectl: str,
        resync: int = 2,
        start_timeout: float = 120.0,
        rollouts: bool = True,
        argocd: bool = True,
    ) -> None:
        self.work = work
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl
        self.resync = resync
        self.start_timeout = start_timeout
        self.with_rollouts = rollouts
        self.with_argocd = argocd
        self.git_root = work / "git"
        self.git_port = 0
        self.procs: list[_Proc] = []
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ helpers

    def kubectl_run(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [self.kubectl, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise ServiceError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def apply(self, text: str) -> None:
        self.kubectl_run(
            "apply", "--server-side", "--force-conflicts", "--field-manager=trainops-tests", "-f", "-", stdin=text
        )

    def project(self, name: str) -> None:
        """An Argo CD AppProject open to every repo and destination (an administrator's setup)."""
        self.apply(f"""apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {{name: {name}, namespace: {ARGOCD_NAMESPACE}}}
spec:
  sourceRepos: ['*']
  destinations: [{{server: '*', namespace: '*'}}]
  clusterResourceWhitelist: [{{group: '*', kind: '*'}}]""")

    def repo_url(self, name: str) -> str:
        return f"http://{LOOPBACK}:{self.git_port}/{name}"

    def new_repo(self, name: str) -> str:
        """A bare repository served over HTTP (pushes accepted); its URL."""
        from trainops_testing.githttp import bare_repo

        bare_repo(self.git_root, name)
        return self.repo_url(name)

    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "KUBECONFIG"))}
        env.update(KUBECONFIG=str(self.kubeconfig), HOME=str(self.work / "home"), **extra)
        return env

    def _proc(self, name: str) -> _Proc:
        proc = _Proc(name, self.work / "logs" / f"{name}.log")
        self.procs.append(proc)
        return proc

    # ------------------------------------------------------------------ install

    def _crds(self) -> None:
        # the serving path's other kinds: the Gateway API route and the Prometheus Operator's
        # ServiceMonitor, PrometheusRule and PodMonitor (spec.slo) (the vendored CRDs; Argo CD refuses to
        # sync a kind the cluster lacks)
        crds = ROOT / "trainops/render/crds"
        files = [crds / f"{n}.yaml" for n in ("gateway-httproute", "prometheus-servicemonitor",
                                              "prometheus-prometheusrule", "prometheus-podmonitor")]  # fmt: skip
        names = "crd/httproutes.gateway.networking.k8s.io crd/servicemonitors.monitoring.coreos.com"
        names += " crd/prometheusrules.monitoring.coreos.com crd/podmonitors.monitoring.coreos.com"
        if self.with_argocd:
            argocd = upstream_crds("argocd")
            files += [f for f in argocd if "applicationset" not in f.name]
            names += " crd/applications.argoproj.io crd/appprojects.argoproj.io"
        if self.with_rollouts:
            files += upstream_crds("rollouts")
        for f in files:
            self.apply(f.read_text())
        if self.with_rollouts:
            names += " crd/rollouts.argoproj.io crd/analysisruns.argoproj.io crd/analysistemplates.argoproj.io"
        # polled, not `kubectl wait`: that fails while a CRD just applied has no status yet
        jsonpath = '{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{"\\n"}{end}'

        def established() -> bool:
            out = self.kubectl_run("get", *names.split(), "-o", f"jsonpath={jsonpath}")
            return out.split() == ["True"] * len(names.split())

        wait_for(established, timeout=60, what="the CRDs Established", interval=0.2)

    def _objects(self, plugin: Path | None) -> None:
        docs = [
            f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ARGOCD_NAMESPACE}}}",
            f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: {ARGOCD_NAMESPACE}
  labels: {{app.kubernetes.io/name: argocd-cm, app.kubernetes.io/part-of: argocd}}
data:
  timeout.reconciliation: {self.resync}s""",
            f"""apiVersion: v1
kind: Secret
metadata:
  name: argocd-secret
  namespace: {ARGOCD_NAMESPACE}
  labels: {{app.kubernetes.io/name: argocd-secret, app.kubernetes.io/part-of: argocd}}
stringData:
  server.secretkey: {secrets.token_hex(16)}""",
        ]
        if not self.with_argocd:
            docs = []
        if plugin is not None:
            docs += [
                f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ROLLOUTS_NAMESPACE}}}",
                f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: argo-rollouts-config, namespace: {ROLLOUTS_NAMESPACE}}}
data:
  trafficRouterPlugins: |
    - name: {PLUGIN_NAME}
      location: file://{plugin}""",
            ]
        if docs:
            self.apply("\n---\n".join(docs))
        if self.with_argocd:
            self.project("default")

    # ------------------------------------------------------------------ start

    def _start_git(self) -> None:
        self.git_root.mkdir(parents=True, exist_ok=True)
        self.git_port = free_port()
        proc = self._proc("githttp")
        cmd = [sys.executable, str(HERE / "githttp.py"), "--root", str(self.git_root), "--port", str(self.git_port)]
        proc.run(cmd, env=dict(os.environ), ready=self.git_port, timeout=30)

    def _start_argocd(self) -> None:
        argocd = str(kube_binary("argocd"))
        redis_bin = require("redis-server", "apt-get install -y redis-server")
        (self.work / "home").mkdir(parents=True, exist_ok=True)
        (self.work / "tmp").mkdir(parents=True, exist_ok=True)
        redis_port = free_port()
        redis = self._proc("redis")
        redis.run(
            [redis_bin, "--bind", LOOPBACK, "--port", str(redis_port), "--save", "", "--appendonly", "no"],
            env=dict(os.environ),
            ready=redis_port,
            timeout=30,
        )
        redis_addr = f"{LOOPBACK}:{redis_port}"
        # the repo-server runs Argo CD's git-verify-wrapper.sh on every revision (GPG off or
        # not: a failure is "permission denied"); the image puts it on PATH, here tests/upstream/ has it
        tools = self.work / "argocd-bin"
        tools.mkdir(parents=True, exist_ok=True)
        wrapper = tools / "git-verify-wrapper.sh"
        wrapper.write_text(f'#!/bin/sh\nexec /bin/sh {upstream("argocd") / "hack" / wrapper.name} "$@"\n')
        wrapper.chmod(0o755)
        repo_port, repo_metrics = free_port(), free_port()
        repo = self._proc("argocd-repo-server")
        repo.run(
            [
                argocd,
                "--loglevel=info",
                f"--address={LOOPBACK}",
                f"--port={repo_port}",
                f"--metrics-address={LOOPBACK}",
                f"--metrics-port={repo_metrics}",
                f"--redis={redis_addr}",
                "--disable-tls",  # gRPC on loopback between two local processes
                "--client-ca-path=",  # its default (a pod's mounted Secret) is refused beside --disable-tls
                f"--revision-cache-expiration={self.resync}s",
            ],
            env=self._env(
                ARGOCD_BINARY_NAME="argocd-repo-server",
                ARGOCD_GPG_ENABLED="false",
                PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
                TMPDIR=str(self.work / "tmp"),  # its clones (/tmp/_argocd-repo by default): ours alone
            ),
            ready=f"http://{LOOPBACK}:{repo_metrics}/metrics",
            timeout=self.start_timeout,
        )
        metrics = free_port()
        controller = self._proc("argocd-application-controller")
        controller.run(
            [
                argocd,
                "--loglevel=info",
                f"--namespace={ARGOCD_NAMESPACE}",
                f"--redis={redis_addr}",
                f"--repo-server={LOOPBACK}:{repo_port}",
                "--repo-server-plaintext",
                f"--metrics-port={metrics}",
                f"--app-resync={self.resync}",
                "--app-resync-jitter=0",
                "--self-heal-timeout-seconds=1",
            ],
            env=self._env(ARGOCD_BINARY_NAME="argocd-application-controller", ARGOCD_FAKE_IN_CLUSTER="true"),
            ready=f"http://{LOOPBACK}:{metrics}/metrics",
            timeout=self.start_timeout,
        )

    def _start_rollouts(self) -> None:
        binary = str(kube_binary("rollouts-controller"))
        healthz, metrics = free_port(), free_port()
        home = self.work / "rollouts"
        home.mkdir(parents=True, exist_ok=True)
        proc = self._proc("argo-rollouts")
        proc.run(
            [
                binary,
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--healthzPort={healthz}",
                f"--metricsport={metrics}",
                "--rollout-resync=30",
                "--loglevel=info",
            ],
            env=self._env(POD_NAMESPACE=ROLLOUTS_NAMESPACE),
            ready=f"http://{LOOPBACK}:{healthz}/healthz",
            timeout=self.start_timeout,
            cwd=home,
        )

    def start(self) -> ArgoStack:
        plugin = kube_binary("gatewayapi-plugin") if self.with_rollouts else None
        t0 = time.monotonic()
        self._crds()
        self._objects(plugin)
        self.timings["install"] = time.monotonic() - t0
        try:
            steps = [("git", self._start_git)] + ([("argocd", self._start_argocd)] if self.with_argocd else [])
            for name, step in steps:
                t0 = time.monotonic()
                step()
                self.timings[name] = time.monotonic() - t0
            if self.with_rollouts:
                t0 = time.monotonic()
                self._start_rollouts()
                self.timings["rollouts"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    def logs(self, lines: int = 30) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log(lines)}" for p in self.procs)

    def __enter__(self) -> ArgoStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
