"""A simulated Kubernetes cluster: upstream control plane, Volcano, Kueue, kwok GPU nodes.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (the default scheduler:
it places what Kueue admits), kwok (fake nodes with ``nvidia.com/gpu`` and rack/spine
labels; pods become Running without kubelets), the Volcano scheduler and controllers, and
the Kueue and JobSet controllers; the LeaderWorkerSet controller and the Kubeflow Trainer
controller when asked for (``lws``, ``trainer``).
Every binary comes from ``scripts/kube_components.py`` at the versions of
``scripts/kube-versions.env``; everything listens on 127.0.0.1 only (every
component's serving, metrics and health flags are set here), with a CA, serving and client
certificates and service-account keys made with openssl at start.

One home for two callers: ``scripts/kube-sim.sh up|down`` (this module's ``__main__``: the
processes outlive it, ``down`` stops them by the PIDs written in the cluster directory) and
the pytest fixtures (``tests/conftest.py``: ``kube_cluster``, ``kube_cluster_factory``).

Pods finish when a test says so: annotate a pod ``kwok.trainops.dev/exit: "0"`` (or a
non-zero code) and kwok moves it to Succeeded (or Failed), whatever owns it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops_testing.kube_addons import AddonsMixin
from trainops_testing.kube_api import FIELD_MANAGER, ApiError, KubeApi, make_pki, write_kubeconfig
from trainops_testing.kube_bins import binary
from trainops_testing.kube_config import EXIT_ANNOTATION, RACK_LABEL, SPINE_LABEL, kwok_config
from trainops_testing.services import LOOPBACK, ServiceError, free_port, wait_for

__all__ = [
    "EXIT_ANNOTATION",
    "FIELD_MANAGER",
    "POOL_LABEL",
    "RACK_LABEL",
    "SPINE_LABEL",
    "ApiError",
    "KubeApi",
    "KubeCluster",
    "Shape",
]

REPO = Path(__file__).resolve().parent.parent

GPU = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
POOL_LABEL = "node.trainops.dev/pool"

# Components in start order; each needs the ones before it that it names. ALL_COMPONENTS is
# what starts by default; an EXTRA one only when named (`--components …,lws`).
ALL_COMPONENTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "volcano", "jobset", "kueue")
# the LeaderWorkerSet controller of multi-node serving; KubeRay's operator of the ray target;
# Kubeflow Trainer (TrainJob → JobSet: needs jobset)
EXTRA_COMPONENTS = ("lws", "kuberay", "trainer")
KNOWN_COMPONENTS = ALL_COMPONENTS + EXTRA_COMPONENTS
CORE = ("etcd", "apiserver")
# Kubernetes 1.37's Workload API: its group version and the feature gate of the API server,
# the controller-manager and the scheduler (GenericWorkload, beta, default off)
WORKLOAD_API = "scheduling.k8s.io/v1beta1"
WORKLOAD_GATES = ("GenericWorkload",)


# ------------------------------------------------------------------------- processes


@dataclass
class _Proc:
    name: str
    pid: int
    binary: str


def _alive(pid: int, binary: str) -> bool:
    """Is ``pid`` still the process we started (its executable is ``binary``)?"""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    if exe.endswith(" (deleted)"):
        exe = exe[: -len(" (deleted)")]
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and os.path.realpath(exe) == os.path.realpath(binary)


def stop_pid(proc: _Proc, *, timeout: float = 15.0) -> None:
    """SIGTERM the process we started, wait, SIGKILL if it lingers; never another process."""
    if not _alive(proc.pid, proc.binary):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(proc.pid, os.WNOHANG)[0] == proc.pid:
                return
        if not _alive(proc.pid, proc.binary):
            return
        time.sleep(0.05)  # pacing between checks of the process table
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(proc.pid, 0)


# ------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class Shape:
    """How many fake nodes, their GPUs, and how they group into racks under spines."""

    nodes: int = 8
    gpus_per_node: int = 8
    racks: int = 2
    spines: int = 1
    cpu: str = "128"
    memory: str = "2Ti"
    # what an InfiniBand GPU node's device plugins advertise besides GPUs (tiny-llm asks for it)
    extra: tuple[tuple[str, str], ...] = (("rdma/rdma_shared_device_a", "1000"),)

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.racks < 1 or self.spines < 1:
            raise ValueError("nodes, racks and spines must be at least 1")
        if self.racks > self.nodes or self.spines > self.racks:
            raise ValueError("need nodes >= racks >= spines")

    def node_name(self, i: int) -> str:
        return f"gpu-{i:04d}"

    def rack_of(self, i: int) -> int:
        return i * self.racks // self.nodes

    def spine_of(self, rack: int) -> int:
        return rack * self.spines // self.racks


@dataclass
class KubeCluster(AddonsMixin):
    """A simulated cluster under ``directory``; ``.kubeconfig``, ``.server``, ``.api``, ``.nodes``."""

    directory: Path
    shape: Shape = field(default_factory=Shape)
    components: Sequence[str] = ALL_COMPONENTS
    volcano_config: str | None = None
    # the cluster's network topology as Volcano HyperNodes (tier 1 a rack, tier 2 a spine):
    # what an administrator (or Volcano's label discovery) sets up; off to test a render's own
    hypernodes: bool = True
    # the JobSet controller's feature gates (its Configuration's featureGates), such as
    # {"RestartJob": True} for the failure policy action that recreates one child Job
    jobset_gates: dict[str, bool] = field(default_factory=dict)
    # Kubernetes' own gang scheduling: the Workload API (scheduling.k8s.io/v1beta1 Workload and
    # PodGroup, beta and off by default in 1.37) served by the API server and the default
    # scheduler's gang plugin on; see WORKLOAD_GATES
    workload_api: bool = False
    procs: list[_Proc] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory).resolve()
        unknown = set(self.components) - set(KNOWN_COMPONENTS)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)} (known: {', '.join(KNOWN_COMPONENTS)})")
        self.components = tuple(c for c in KNOWN_COMPONENTS if c in set(self.components) | set(CORE))
        self.pki = self.directory / "pki"
        self.logs = self.directory / "logs"
        self.kubeconfig = self.directory / "kubeconfig"
        self.state_file = self.directory / "cluster.json"
        self._api: KubeApi | None = None
        self._children: list[subprocess.Popen[bytes]] = []

    # -- what callers use

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['apiserver']}"

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = KubeApi(self.server, self.pki)
        return self._api

    @property
    def nodes(self) -> list[str]:
        return [self.shape.node_name(i) for i in range(self.shape.nodes)]

    def node_labels(self, i: int) -> dict[str, str]:
        """Hostname, rack and spine (values rack-N, spine-N as a spec.cluster.topology names
        its domains) and the GPU pool label."""
        rack = self.shape.rack_of(i)
        return {
            HOSTNAME_LABEL: self.shape.node_name(i),
            RACK_LABEL: f"rack-{rack}",
            SPINE_LABEL: f"spine-{self.shape.spine_of(rack)}",
            POOL_LABEL: "gpu",
            "type": "kwok",
        }

    @property
    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The tests' convenience (trainops itself never runs kubectl)."""
        cmd = [str(binary("kubectl")), "--kubeconfig", str(self.kubeconfig), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=check)

    # -- start and stop

    def start(self) -> None:
        t0 = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - t0

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        for component in self.components:  # every missing binary fails before anything starts
            self._binaries(component)
        self._step("pki", lambda: make_pki(self.pki))
        for component in self.components:
            self._step(component, getattr(self, "_start_" + component.replace("-", "_")))
        self._save()

    def _step(self, name: str, action: Callable[[], None]) -> None:
        t0 = time.monotonic()
        action()
        self.timings[name] = round(time.monotonic() - t0, 2)

    def _binaries(self, component: str) -> list[Path]:
        names = {
            "etcd": ["etcd"],
            "apiserver": ["kube-apiserver"],
            "controller-manager": ["kube-controller-manager"],
            "scheduler": ["kube-scheduler"],
            "kwok": ["kwok"],
            "volcano": ["vc-webhook-manager", "vc-scheduler", "vc-controller-manager"],
            "kueue": ["kueue", "kubectl"],
            "jobset": ["jobset", "kubectl"],
            "lws": ["lws", "kubectl"],  # kubectl builds its webhook configurations (kustomize)
            "kuberay": ["ray-operator"],
            "trainer": ["trainer-controller-manager", "kubectl"],
        }[component]
        return [binary(n) for n in names]

    def stop(self) -> None:
        """Stop every process this cluster started, newest first, by PID."""
        for proc in reversed(self.procs):
            stop_pid(proc)
        for child in self._children:  # reaped by stop_pid: let Popen know
            with contextlib.suppress(ChildProcessError):
                child.poll()
        self._children.clear()
        self.procs.clear()
        if self.state_file.exists():
            self._save()

    def discard_state(self) -> bool:
        """Remove what a stopped cluster keeps in its directory that a new start cannot reuse:
        etcd's data (its nodes and objects; certificates, configuration and kubeconfig are made
        again at start, logs are appended to). True when there was some. Never while running."""
        if any(_alive(p.pid, p.binary) for p in self.procs):
            raise ServiceError(f"a cluster is running in {self.directory}: stop it first")
        data = self.directory / "etcd"
        if not data.is_dir():
            return False
        shutil.rmtree(data)
        return True

    def _save(self) -> None:
        state = {
            "ports": self.ports,
            "procs": [p.__dict__ for p in self.procs],
            "components": list(self.components),
            "shape": self.shape.__dict__,
            "timings": self.timings,
        }
        self.state_file.write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, directory: Path) -> KubeCluster:
        """The cluster ``up`` left in ``directory`` (for ``down`` and for scripts)."""
        state = json.loads((Path(directory) / "cluster.json").read_text())
        cluster = cls(Path(directory), shape=Shape(**state["shape"]), components=state["components"])
        cluster.ports = state["ports"]
        cluster.procs = [_Proc(**p) for p in state["procs"]]
        cluster.timings = state.get("timings", {})
        return cluster

    def _spawn(
        self,
        name: str,
        exe: Path,
        args: Iterable[str],
        *,
        what: str,
        ready: Callable[[], bool],
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        """Start `exe` (through `prefix`, a command that ends by exec'ing it: the PID is the
        component's) and wait until `ready`."""
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [*prefix, str(exe), *args],
                env={**os.environ, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
            )
        self.procs.append(_Proc(name=name, pid=proc.pid, binary=str(exe)))
        self._children.append(proc)
        self._save()
        wait_for(ready, timeout=120, what=what, proc=proc, log_path=log_path, interval=0.2)

    def _port(self, name: str) -> int:
        self.ports[name] = free_port()
        return self.ports[name]

    def _healthz(self, url: str) -> Callable[[], bool]:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # readiness only: the component's own self-signed cert

        def probe() -> bool:
            with urllib.request.urlopen(url, timeout=2, context=context if url.startswith("https") else None) as r:
                return bool(r.status == 200)

        return probe

    # -- components

    def _start_etcd(self) -> None:
        client, peer = self._port("etcd"), self._port("etcd-peer")
        args = [
            "--name=kubesim",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls=http://{LOOPBACK}:{client}",
            f"--advertise-client-urls=http://{LOOPBACK}:{client}",
            f"--listen-peer-urls=http://{LOOPBACK}:{peer}",
            f"--initial-advertise-peer-urls=http://{LOOPBACK}:{peer}",
            f"--initial-cluster=kubesim=http://{LOOPBACK}:{peer}",
            "--unsafe-no-fsync",  # a throwaway test store: durability is not the point
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ]
        self._spawn(
            "etcd", binary("etcd"), args, what="etcd", ready=self._healthz(f"http://{LOOPBACK}:{client}/health")
        )

    def _start_apiserver(self) -> None:
        port = self._port("apiserver")
        pki = self.pki
        args = [
            f"--etcd-servers=http://{LOOPBACK}:{self.ports['etcd']}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={self.directory / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # it taints new nodes not-ready until the node lifecycle controller (off here:
            # kwok sends no heartbeats) sees them Ready
            "--disable-admission-plugins=TaintNodesByCondition",
            "--profiling=false",
            "--endpoint-reconciler-type=none",  # no kubelets: the kubernetes Service has no real endpoints
            "--max-requests-inflight=1000",
            "--max-mutating-requests-inflight=500",
            *self._workload_flags(runtime_config=True),
        ]
        self._spawn(
            "kube-apiserver", binary("kube-apiserver"), args, what="kube-apiserver", ready=self._apiserver_ready
        )
        write_kubeconfig(self.kubeconfig, self.server, self.pki)
        self._api = None

    def _apiserver_ready(self) -> bool:
        return KubeApi(self.server, self.pki).readyz()

    def _workload_flags(self, *, runtime_config: bool = False) -> list[str]:
        """With workload_api: the feature gate on every control-plane component, and the API
        group version the API server serves (a beta API is off unless asked for)."""
        if not self.workload_api:
            return []
        flags = [f"--feature-gates={','.join(f'{g}=true' for g in WORKLOAD_GATES)}"]
        return [*flags, f"--runtime-config={WORKLOAD_API}=true"] if runtime_config else flags

    def _common_kube_flags(self, port_name: str) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self._port(port_name)}",
            f"--cert-dir={self.directory / (port_name + '-certs')}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def _start_controller_manager(self) -> None:
        args = [
            *self._common_kube_flags("controller-manager"),
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            # kwok nodes send no heartbeats (no leases: 1,000 nodes would be 100 writes a
            # second on two cores): without the node lifecycle controller they stay Ready.
            "--controllers=*,-node-lifecycle-controller",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--concurrent-job-syncs=20",
            *self._workload_flags(),
        ]
        url = f"https://{LOOPBACK}:{self.ports['controller-manager']}/healthz"
        self._spawn(
            "kube-controller-manager",
            binary("kube-controller-manager"),
            args,
            what="kube-controller-manager",
            ready=self._healthz(url),
        )

    def _start_scheduler(self) -> None:
        args = [*self._common_kube_flags("scheduler"), *self._workload_flags()]
        url = f"https://{LOOPBACK}:{self.ports['scheduler']}/healthz"
        self._spawn("kube-scheduler", binary("kube-scheduler"), args, what="kube-scheduler", ready=self._healthz(url))

    def _start_kwok(self) -> None:
        config = self.directory / "kwok.yaml"
        config.write_text(kwok_config())
        port = self._port("kwok")
        args = [
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            f"--server-address={LOOPBACK}:{port}",
            "--node-ip=10.250.0.1",
            "--cidr=10.244.0.0/16",
            "--node-lease-duration-seconds=0",
        ]
        self._spawn("kwok", binary("kwok"), args, what="kwok", ready=self._healthz(f"http://{LOOPBACK}:{port}/healthz"))
        self.add_nodes(range(self.shape.nodes))

    def add_nodes(self, indices: Iterable[int]) -> None:
        """Create fake nodes (kwok makes them Ready); returns when all are Ready."""
        names = []
        for i in indices:
            names.append(self.shape.node_name(i))
            # create, not apply: a Node's status (its GPUs) is kept on create only
            self.api.create(self._node(i))
        wait_for(
            lambda: _ready_nodes(self.api) >= len(names),
            timeout=60 + len(names) / 10,
            what=f"{len(names)} kwok nodes Ready",
            log_path=self.logs / "kwok.log",
            interval=0.2,
        )

    def _node(self, i: int) -> dict[str, Any]:
        s = self.shape
        resources = {"cpu": s.cpu, "memory": s.memory, "pods": "110", GPU: str(s.gpus_per_node), **dict(s.extra)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": s.node_name(i),
                "labels": self.node_labels(i),
                "annotations": {KWOK_ANNOTATION: "fake"},
            },
            "spec": {},
            "status": {"allocatable": resources, "capacity": resources},
        }


def listening(pids: Iterable[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state the processes hold (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    out: set[tuple[str, int]] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                    continue
                address, port = fields[1].split(":")
                out.add((_ip(address, width), int(port, 16)))
    return out


def _ip(hex_address: str, width: int) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp* print each 32-bit word in host (little-endian) order
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words) if width == 8 else ipaddress.IPv6Address(words)
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def _ready_nodes(api: KubeApi) -> int:
    count = 0
    for node in api.list("v1", "Node"):
        for cond in node.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                count += 1
    return count


# ------------------------------------------------------------------------- the CLI


@contextlib.contextmanager
def running(
    directory: Path, shape: Shape | None = None, components: Sequence[str] = ALL_COMPONENTS
) -> Iterator[KubeCluster]:
    cluster = KubeCluster(directory, shape=shape or Shape(), components=components)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kube-sim.sh", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a simulated cluster and print its KUBECONFIG")
    up.add_argument("--dir", type=Path, default=Path(".kube-sim"), help="cluster directory (default .kube-sim)")
    up.add_argument("--nodes", type=int, default=8)
    up.add_argument("--gpus-per-node", type=int, default=8)
    up.add_argument("--racks", type=int, default=2)
    up.add_argument("--spines", type=int, default=1)
    up.add_argument(
        "--components",
        default=",".join(ALL_COMPONENTS),
        help=f"comma-separated components to start (default: {','.join(ALL_COMPONENTS)}; "
        f"also: {','.join(EXTRA_COMPONENTS)})",
    )
    up.add_argument(
        "--workload-api",
        action="store_true",
        help="serve Kubernetes' Workload API (scheduling.k8s.io/v1beta1, the GenericWorkload gate) for the "
        "kubernetes scheduler's gangs",
    )
    up.add_argument(
        "--jobset-gate", action="append", default=[], metavar="NAME", help="turn on a JobSet controller feature gate"
    )
    down = sub.add_parser("down", help="stop the cluster started in --dir, by its PIDs")
    down.add_argument("--dir", type=Path, default=Path(".kube-sim"))
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.command == "down":
        if not (directory / "cluster.json").exists():
            print(f"kube-sim: no cluster in {directory}", file=sys.stderr)
            return 1
        old = KubeCluster.load(directory)
        total, running = len(old.procs), sum(_alive(p.pid, p.binary) for p in old.procs)
        old.stop()
        print(
            f"kube-sim: stopped the cluster in {directory} ({running} of {total} processes were running); "
            "left there: etcd's data, the certificates, kubeconfig and logs (the next `up` there starts fresh; "
            "remove the directory to delete them)",
            file=sys.stderr,
        )
        return 0
    if (directory / "cluster.json").exists():
        old = KubeCluster.load(directory)
        if any(_alive(p.pid, p.binary) for p in old.procs):
            print(f"kube-sim: a cluster is already running in {directory} (run `down` first)", file=sys.stderr)
            return 1
        if old.discard_state():
            note = f"kube-sim: {directory} held a stopped cluster: starting fresh (its etcd data removed)"
            print(note, file=sys.stderr)
    try:
        shape = Shape(nodes=args.nodes, gpus_per_node=args.gpus_per_node, racks=args.racks, spines=args.spines)
        cluster = KubeCluster(
            directory,
            shape=shape,
            components=args.components.split(","),
            workload_api=args.workload_api,
            jobset_gates={name: True for name in args.jobset_gate},
        )
        cluster.start()
    except (ServiceError, ValueError) as exc:
        print(f"kube-sim: {exc}", file=sys.stderr)
        return 1
    up = f"kube-sim: up in {cluster.timings['total']:.1f}s ({len(cluster.nodes)} nodes)"
    print(f"{up}; stop with: scripts/kube-sim.sh down --dir {directory}", file=sys.stderr)
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
