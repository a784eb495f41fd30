"""Volcano, JobSet, Kueue, LeaderWorkerSet and Kubeflow Trainer on the simulated cluster: their CRDs (the
vendored ones where trainops has them, else upstream's own at the pinned version, vendored in
tests/upstream/),
configuration, admission webhooks and processes. A mixin of ``KubeCluster``
(trainops_testing/kube_cluster.py), kept apart for size.
"""

from __future__ import annotations

import copy
import functools
import shutil
import socket
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.kube_bins import binary, upstream
from trainops_testing.kube_config import (
    LOOPBACK,
    RACK_LABEL,
    SPINE_LABEL,
    VOLCANO_SCHEDULER_CONF,
    VOLCANO_WEBHOOKS,
    hypernode,
    volcano_webhook_configurations,
    webhook_configurations,
)
from trainops_testing.services import ServiceError, wait_for

REPO = Path(__file__).resolve().parent.parent
VENDORED_CRDS = REPO / "trainops" / "render" / "crds"
VOLCANO_NAMESPACE = "volcano-system"
KUEUE_METRICS_CERTS = "/etc/kueue/metrics/certs"


@functools.cache
def _mount_namespaces() -> bool:
    """Can this process give a child a mount namespace with a bind mount of its own?"""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = [unshare, "--mount", "--propagation", "private", "--", "mount", "--bind", "/", "/mnt"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@functools.cache
def _yaml_docs(path: Path) -> tuple[Any, ...]:
    """A YAML file's documents, parsed once per process with libyaml's loader where it is
    built (the vendored CRDs are ~100,000 lines: the pure-Python loader took ~12 s per
    cluster start under load). Callers must not change what they get."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(yaml.load_all(path.read_text(), Loader=loader))


class AddonsMixin:
    """The add-on components; ``KubeCluster`` provides api, pki, directory, ports, _spawn, …"""

    def install_crds(self, paths: Iterable[Path]) -> None:
        """Server-side apply CRDs and wait until each is Established."""
        names = []
        for path in paths:
            for parsed in _yaml_docs(path):
                if parsed and parsed.get("kind") == "CustomResourceDefinition":
                    doc = copy.deepcopy(parsed)
                    doc.setdefault("metadata", {}).pop("creationTimestamp", None)
                    doc.pop("status", None)
                    self.api.apply(doc)
                    names.append(doc["metadata"]["name"])

        def established() -> bool:
            for name in names:
                crd = self.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
                conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
                if conds.get("Established") != "True":
                    return False
            return True

        wait_for(established, timeout=60, what=f"CRDs established ({len(names)})", interval=0.2)

    def _crd_files(self, component: str, subdirs: Sequence[str]) -> list[Path]:
        """Upstream CRDs at the pinned version, with trainops' vendored ones in their place."""
        vendored = {}
        for path in VENDORED_CRDS.glob("*.yaml"):
            for doc in _yaml_docs(path):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    vendored[doc["metadata"]["name"]] = path
        out: list[Path] = []
        src = upstream(component)
        for sub in subdirs:
            for path in sorted((src / sub).glob("*.yaml")):
                docs = _yaml_docs(path)
                name = ((docs[0] if docs else None) or {}).get("metadata", {}).get("name")
                out.append(vendored.get(name, path))
        return out

    def _start_volcano(self) -> None:
        self.install_crds(self._crd_files("volcano", ["config/crd/volcano/bases", "config/crd/jobflow/bases"]))
        self.api.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": VOLCANO_NAMESPACE},
            }
        )
        self._step("volcano-webhook", self._start_volcano_webhook)
        conf = self.directory / "volcano-scheduler.conf"
        conf.write_text(self.volcano_config or VOLCANO_SCHEDULER_CONF)
        metrics, health = self._port("volcano-scheduler-metrics"), self._port("volcano-scheduler")
        args = [
            f"--kubeconfig={self.kubeconfig}",
            f"--scheduler-conf={conf}",
            "--schedule-period=500ms",
            f"--listen-address={LOOPBACK}:{metrics}",
            f"--healthz-address={LOOPBACK}:{health}",
            "--enable-healthz=true",
            "--enable-metrics=false",
            "--leader-elect=false",
            f"--cache-dump-dir={self.directory / 'volcano-dump'}",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "-v=2",
        ]
        self._spawn(
            "vc-scheduler",
            binary("vc-scheduler"),
            args,
            what="volcano scheduler",
            ready=self._healthz(f"http://{LOOPBACK}:{health}/healthz"),
        )
        cm_metrics, cm_health = self._port("volcano-controllers-metrics"), self._port("volcano-controllers")
        args = [
            f"--kubeconfig={self.kubeconfig}",
            f"--listen-address={LOOPBACK}:{cm_metrics}",
            f"--healthz-address={LOOPBACK}:{cm_health}",
            "--enable-healthz=true",
            "--enable-metrics=false",
            "--leader-elect=false",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "-v=2",
        ]
        self._spawn(
            "vc-controller-manager",
            binary("vc-controller-manager"),
            args,
            what="volcano controller-manager",
            ready=self._healthz(f"http://{LOOPBACK}:{cm_health}/healthz"),
        )
        if self.hypernodes:
            self.apply_hypernodes()
        # Volcano's installer creates the default queue (jobs without a queue go there).
        self.api.apply(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1, "reclaimable": True},
            }
        )

    def _start_volcano_webhook(self) -> None:
        """Volcano's admission webhook (job defaulting and validation, queues, pod groups,
        HyperNodes) on 127.0.0.1 with a serving certificate of the cluster's CA. Its webhook
        configurations go in first: the manager waits for them by name and only sets their
        caBundle. Ready when the API server gets an answer from it (a Queue, dry run)."""
        port = self._port("volcano-webhook")
        for obj in volcano_webhook_configurations(port=port, ca=self.pki / "ca.crt", namespace=VOLCANO_NAMESPACE):
            self.api.apply(obj)
        args = [
            f"--kubeconfig={self.kubeconfig}",
            f"--listen-address={LOOPBACK}",
            f"--port={port}",
            f"--tls-cert-file={self.pki / 'webhook.crt'}",
            f"--tls-private-key-file={self.pki / 'webhook.key'}",
            f"--ca-cert-file={self.pki / 'ca.crt'}",
            f"--webhook-url=https://{LOOPBACK}:{port}",
            "--enabled-admission=" + ",".join(path for path, *_ in VOLCANO_WEBHOOKS),
            "--enable-healthz=false",  # it answers before the webhooks are served: the probe below is the truth
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "-v=2",
        ]
        probe = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "kubesim-webhook-probe"},
            "spec": {"weight": 1},
        }
        self._spawn(
            "vc-webhook-manager",
            binary("vc-webhook-manager"),
            args,
            what="volcano webhook-manager",
            ready=lambda: bool(self.api.apply(probe, dry_run=True)),
        )

    def reconfigure_volcano(self, conf: str) -> None:
        """Give the running Volcano scheduler another configuration: it reloads its file when it
        changes; returns once its log says it loaded these actions."""
        actions = [a.strip() for a in conf.split("\n", 1)[0].split('"')[1].split(",")]
        line = f"Final state: actions=[{' '.join(actions)}]"
        log = self.logs / "vc-scheduler.log"
        before = log.read_text(errors="replace").count(line)
        (self.directory / "volcano-scheduler.conf").write_text(conf)
        wait_for(
            lambda: log.read_text(errors="replace").count(line) > before,
            timeout=30,
            what=f"volcano scheduler reloaded with actions {actions}",
            log_path=log,
            interval=0.2,
        )

    def hypernode_objects(self) -> list[dict[str, Any]]:
        """Tier 1: one HyperNode per rack (its nodes by label); tier 2: one per spine (its racks)."""
        racks: dict[str, str] = {}
        for i in range(self.shape.nodes):
            labels = self.node_labels(i)
            racks[labels[RACK_LABEL]] = labels[SPINE_LABEL]
        out = []
        for rack in sorted(racks):
            member = {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK_LABEL: rack}}}}
            out.append(hypernode(rack, 1, [member]))
        for spine in sorted(set(racks.values())):
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": rack}}}
                for rack in sorted(racks)
                if racks[rack] == spine
            ]
            out.append(hypernode(spine, 2, members))
        return out

    def apply_hypernodes(self) -> None:
        for obj in self.hypernode_objects():
            self.api.apply(obj)

    def _controller_runtime(
        self,
        *,
        name: str,
        exe: Path,
        namespace: str,
        config: dict[str, Any],
        webhooks: Path,
        keep_groups: frozenset[str],
        args: Sequence[str] = (),
        prefix: Sequence[str] = (),
        cert_dir_option: bool = True,
    ) -> None:
        """A controller-runtime manager (Kueue, JobSet, LeaderWorkerSet, Kubeflow Trainer): loopback
        ports, our webhook certificate, and the webhook configurations its kustomization directory
        ``webhooks`` builds, pointed at 127.0.0.1 (no Service: no pod network here).

        Without ``cert_dir_option`` (the Trainer's Configuration has no webhook certDir, nor
        internalCertManagement: its own is certManagement, in ``config``) the certificate goes
        where controller-runtime looks by default, $TMPDIR/k8s-webhook-server/serving-certs, with
        a TMPDIR of the manager's own."""
        self.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        tmp = self.directory / f"{name}-tmp"
        certs = self.directory / f"{name}-certs" if cert_dir_option else tmp / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.pki / "webhook.crt", certs / "tls.crt")
        shutil.copy(self.pki / "webhook.key", certs / "tls.key")
        webhook, health, metrics = self._port(f"{name}-webhook"), self._port(name), self._port(f"{name}-metrics")
        serving: dict[str, Any] = {"port": webhook, "host": LOOPBACK}
        if cert_dir_option:
            serving["certDir"] = str(certs)
            config = {**config, "internalCertManagement": {"enable": False}}
        config = {
            **config,
            "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health}"},
            "metrics": {"bindAddress": f"{LOOPBACK}:{metrics}"},
            "webhook": serving,
            "leaderElection": {"leaderElect": False},
        }
        path = self.directory / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        readyz = self._healthz(f"http://{LOOPBACK}:{health}/readyz")
        self._spawn(
            name,
            exe,
            [f"--config={path}", *args],
            what=f"{name} (ready, its webhook server listening)",
            # readyz answers before the webhook server listens: a request the API server sends
            # it in between would be refused (failurePolicy Fail)
            ready=lambda: readyz() and _accepts(webhook),
            env={"KUBECONFIG": str(self.kubeconfig), **({} if cert_dir_option else {"TMPDIR": str(tmp)})},
            prefix=prefix,
        )
        built = self.kubectl("kustomize", str(webhooks)).stdout
        for obj in webhook_configurations(built, prefix=name, port=webhook, ca=self.pki / "ca.crt", keep=keep_groups):
            self.api.apply(obj)

    def _start_jobset(self) -> None:
        src = upstream("jobset")
        self.install_crds(sorted((src / "config/components/crd/bases").glob("*.yaml")))
        config: dict[str, Any] = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration"}
        if self.jobset_gates:
            config["featureGates"] = dict(self.jobset_gates)
        self._controller_runtime(
            name="jobset",
            exe=binary("jobset"),
            namespace="jobset-system",
            config=config,
            webhooks=src / "config/components/webhook",
            keep_groups=frozenset({"jobset.x-k8s.io", ""}),
        )

    def _start_lws(self) -> None:
        # the vendored LeaderWorkerSet CRD; DisaggregatedSet's too: the manager runs its controller
        self.install_crds(self._crd_files("lws", ["config/crd/bases"]))
        src = upstream("lws")
        self._controller_runtime(
            name="lws",
            exe=binary("lws"),
            namespace="lws-system",
            config={"apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration"},
            webhooks=src / "config/webhook",
            keep_groups=frozenset({"leaderworkerset.x-k8s.io", "disaggregatedset.x-k8s.io", ""}),
        )

    def _start_kuberay(self) -> None:
        """KubeRay's operator (RayCluster, RayJob, RayService controllers) on loopback ports,
        without its webhooks (off unless ENABLE_WEBHOOKS=true, as in its own install). The
        RayJob controller reaches a cluster's Ray dashboard at its head Service's DNS name:
        here no such name resolves and no Ray runs (kwok's pods run no containers), so it
        keeps asking (docs/development/cluster-components.md says what that leaves testable)."""
        self.install_crds(self._crd_files("kuberay", ["config/crd/bases"]))
        health, metrics = self._port("kuberay"), self._port("kuberay-metrics")
        args = [
            f"--health-probe-bind-address={LOOPBACK}:{health}",
            f"--metrics-addr={LOOPBACK}:{metrics}",
            "--enable-leader-election=false",
            "--log-stdout-encoder=console",
        ]
        self._spawn(
            "kuberay",
            binary("ray-operator"),
            args,
            what="kuberay operator (ready)",
            ready=self._healthz(f"http://{LOOPBACK}:{health}/readyz"),
            env={"KUBECONFIG": str(self.kubeconfig)},
        )

    def _start_trainer(self) -> None:
        """Kubeflow Trainer v2's controller manager: TrainJob, TrainingRuntime and
        ClusterTrainingRuntime (their CRDs from its release), its defaulting and validating
        webhooks; it creates a JobSet per TrainJob, which the JobSet controller runs."""
        src = upstream("trainer")
        self.install_crds(sorted((src / "manifests/base/crds").glob("trainer.kubeflow.org_*.yaml")))
        config = {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "certManagement": {"enable": False},  # it would issue certificates for an in-cluster Service
            "clientConnection": {"qps": 200, "burst": 400},
        }
        self._controller_runtime(
            name="trainer",
            exe=binary("trainer-controller-manager"),
            namespace="kubeflow-system",
            config=config,
            webhooks=src / "manifests/base/webhook",
            keep_groups=frozenset({"trainer.kubeflow.org"}),
            cert_dir_option=False,
        )

    def _start_kueue(self) -> None:
        prefix = self._kueue_metrics_certs()
        crds = self._crd_files("kueue", ["config/components/crd/bases"])
        ray = "kuberay" in self.components
        if ray:  # Kueue enables an integration only when its CRDs are there as it starts
            crds += self._crd_files("kuberay", ["config/crd/bases"])
        trainer = "trainer" in self.components  # Kubeflow Trainer's TrainJob, likewise
        if trainer:
            crds += sorted((upstream("trainer") / "manifests/base/crds").glob("trainer.kubeflow.org_*.yaml"))
        self.install_crds(crds)
        src = upstream("kueue")
        frameworks = ["batch/job"] + (["jobset.x-k8s.io/jobset"] if "jobset" in self.components else [])
        frameworks += ["ray.io/rayjob", "ray.io/raycluster"] if ray else []
        frameworks += ["trainer.kubeflow.org/trainjob"] if trainer else []
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "integrations": {"frameworks": frameworks},
            # the on-demand visibility API server would listen on 0.0.0.0:8082: not needed here
            "featureGates": {"VisibilityOnDemand": False},
            "clientConnection": {"qps": 300, "burst": 500},
            # tenants' quotas ration GPUs, CPU and memory; RDMA devices are the device plugin's
            "resources": {"excludeResourcePrefixes": ["rdma/"]},
        }
        groups = {"kueue.x-k8s.io", "batch"} | ({"jobset.x-k8s.io"} if "jobset" in self.components else set())
        groups |= {"ray.io"} if ray else set()
        groups |= {"trainer.kubeflow.org"} if trainer else set()
        self._controller_runtime(
            name="kueue",
            exe=binary("kueue"),
            namespace="kueue-system",
            config=config,
            webhooks=src / "config/components/webhook",
            keep_groups=frozenset(groups),
            prefix=prefix,
        )

    def _kueue_metrics_certs(self) -> list[str]:
        """Kueue v0.19.2 without its internal certificate management (which would issue
        certificates for an in-cluster Service, not 127.0.0.1) reads its metrics server's
        certificate from /etc/kueue/metrics/certs: a constant of cmd/kueue/main.go, which its
        Configuration cannot change (no metrics certDir or TLS file option; with metrics off,
        bindAddress "0", it still reads the files at start). So the cluster's own copy is
        bind-mounted there in a mount namespace of Kueue's own (the command prefix returned):
        clusters side by side do not share it. Where no mount namespace can be made (no
        CAP_SYS_ADMIN, as in an unprivileged container), the files are written to the path
        itself, shared by every cluster of the machine."""
        fixed = Path(KUEUE_METRICS_CERTS)
        own = self.directory / "kueue-metrics-certs"
        private = _mount_namespaces()
        try:
            fixed.mkdir(parents=True, exist_ok=True)  # the mount point (root)
            own.mkdir(exist_ok=True)
            for target in (own,) if private else (own, fixed):
                for name, source in (("tls.crt", "webhook.crt"), ("tls.key", "webhook.key")):
                    shutil.copy(self.pki / source, target / name)
        except OSError as exc:
            raise ServiceError(
                f"kueue: cannot write its metrics certificate to {fixed} ({exc}): run the tests as root"
            ) from None
        if not private:
            return []
        bind = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", bind, "sh", str(own), str(fixed)]


def _accepts(port: int) -> bool:
    """Does something accept TCP connections on 127.0.0.1:port?"""
    try:
        socket.create_connection((LOOPBACK, port), timeout=2).close()
    except OSError:
        return False
    return True
