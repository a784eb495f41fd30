"""A Slurm cluster for tests: munged, slurmctld and one slurmd per node under one temp dir.

Several nodes run on this one machine: Debian's slurmd is built with multiple-slurmd
support, so each node is a `NodeName=… NodeHostname=<this host> Port=…` line and its own
`slurmd -N <name>` (checked: jobs land on each, `--exclude`, drain and requeue work).

Debian's slurm-wlm 22.05 runs as root without systemd. Everything lives under the cluster's
directory (config, munge key and socket, state, spool, logs, pid files); the daemons listen
on free ports and run in the foreground as children of this process, so they are stopped by
their PIDs (terminate, wait, kill) and never by name. Clients (sbatch, squeue, scontrol,
scancel) find the cluster through ``SLURM_CONF`` (``SlurmCluster.env``).

Plain Python, no pytest: ``tests/slurm/conftest.py`` wraps it in a fixture.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

from trainops_testing.services import ServiceError, _ManagedProcess, free_port, log_tail, require, wait_for

INSTALL = "apt-get install -y slurmctld slurmd slurm-client munge (or scripts/install-test-deps.sh)"

_CONF = """\
ClusterName=trainops-test
SlurmctldHost={host}
SlurmctldPort={ctld_port}
FirstJobId={ctld_port}00
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
ReturnToService=2
JobRequeue=1
MinJobAge=3600
KillWait=10
SlurmdTimeout=30
MpiDefault=none
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
{node_lines}
PartitionName=debug Nodes={node_names} Default=YES MaxTime=INFINITE State=UP
"""
_NODE = "NodeName={name} NodeHostname={host} Port={port} CPUs={cpus} RealMemory=2000 State=UNKNOWN"


class _Daemon(_ManagedProcess):
    stop_timeout = 15.0

    def __init__(self, name: str, log_path: Path) -> None:
        super().__init__(log_path)
        self.name = name

    def start(self) -> None:  # started by SlurmCluster with its own command
        raise ServiceError(f"{self.name} is started by SlurmCluster")

    def spawn(self, cmd: list[str], env: Mapping[str, str]) -> None:
        self._spawn(cmd, env)


class SlurmCluster:
    """munged + slurmctld + a slurmd per node, under ``directory``; ``.env`` for clients.

    The first node is named after this host (``.host``); more nodes (``nodes=N``) are
    ``<host>-2`` … ``<host>-N``, all on this machine. ``.nodes`` lists them."""

    def __init__(self, directory: Path, *, cpus: int | None = None, nodes: int = 1) -> None:
        self.dir = Path(directory)
        self.host = socket.gethostname().split(".")[0]
        self.cpus = cpus or max(os.cpu_count() or 1, 2)
        self.conf = self.dir / "slurm.conf"
        self.nodes = [self.host] + [f"{self.host}-{n}" for n in range(2, nodes + 1)]
        self.munged = _Daemon("munged", self.dir / "log" / "munged.out")
        self.slurmctld = _Daemon("slurmctld", self.dir / "log" / "slurmctld.out")
        self.daemons = {name: _Daemon(f"slurmd {name}", self.dir / "log" / f"slurmd-{name}.out") for name in self.nodes}
        self.slurmd = self.daemons[self.host]

    @property
    def env(self) -> dict[str, str]:
        """What a client needs in its environment to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _binaries(self) -> dict[str, str]:
        names = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")
        return {name: require(name, INSTALL) for name in names}

    def _write_config(self) -> None:
        for sub in ("munge", "state", "spool", "log", *(f"spool/{n}" for n in self.nodes)):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "munge").chmod(0o700)
        key = self.dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        lines = [_NODE.format(name=n, host=self.host, port=free_port(), cpus=self.cpus) for n in self.nodes]
        self.conf.write_text(
            _CONF.format(
                host=self.host,
                ctld_port=free_port(),
                slurmd_port=free_port(),
                dir=self.dir,
                node_lines="\n".join(lines),
                node_names=",".join(self.nodes),
            )
        )

    def start(self) -> None:
        bins = self._binaries()
        self._write_config()
        env = self.client_env()
        munge = self.dir / "munge"
        self.munged.spawn(
            [
                bins["munged"],
                "--foreground",
                "--force",
                f"--key-file={munge / 'munge.key'}",
                f"--socket={munge / 'munge.socket'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={self.dir / 'log' / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
            env,
        )
        wait_for(
            lambda: (munge / "munge.socket").exists(),
            timeout=20,
            what="munged",
            proc=self.munged.proc,
            log_path=self.dir / "log" / "munged.log",
        )
        self.slurmctld.spawn([bins["slurmctld"], "-D", "-i", "-f", str(self.conf)], env)
        wait_for(
            lambda: self.run("scontrol", "ping").returncode == 0 and "UP" in self.run("scontrol", "ping").stdout,
            timeout=30,
            what="slurmctld",
            proc=self.slurmctld.proc,
            log_path=self.dir / "log" / "slurmctld.log",
            interval=0.2,
        )
        self.start_slurmd()

    def start_slurmd(self, node: str | None = None) -> None:
        """Start the slurmd of one node (default: every node) and wait until it is up."""
        for name in [node] if node else self.nodes:
            argv = [require("slurmd", INSTALL), "-D", "-N", name, "-f", str(self.conf)]
            self.daemons[name].spawn(argv, self.client_env())
        for name in [node] if node else self.nodes:
            self.wait_node_state(("IDLE", "MIXED", "ALLOCATED"), timeout=60, node=name)

    def stop_slurmd(self, node: str | None = None) -> None:
        self.daemons[node or self.host].stop()

    def node_state(self, node: str | None = None) -> str:
        out = self.run("sinfo", "-h", "-N", "-n", node or self.host, "-o", "%T").stdout.strip()
        return out.upper()

    def node_reason(self, node: str) -> str:
        """The reason a node is drained or down (`sinfo -o %E`), '' if none."""
        out = self.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").stdout.strip()
        return "" if out == "none" else out

    def wait_node_state(self, states: tuple[str, ...], *, timeout: float, node: str | None = None) -> None:
        name = node or self.host
        daemon = self.daemons[name]
        wait_for(
            lambda: self.node_state(name).rstrip("*~#!%$@+-") in states,
            timeout=timeout,
            what=f"node {name} in state {'/'.join(states)}",
            proc=daemon.proc if daemon.running else None,
            log_path=self.dir / "log" / f"slurmd-{name}.log",
            interval=0.2,
        )

    def run(self, *argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster."""
        proc = subprocess.run(
            list(argv), env=self.client_env(), capture_output=True, text=True, check=False, timeout=60
        )
        if check and proc.returncode != 0:
            raise ServiceError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o ID` as a dict ({} when slurmctld no longer knows it)."""
        proc = self.run("scontrol", "show", "job", "-o", job_id)
        if proc.returncode != 0:
            return {}
        # one line of Key=Value pairs; a value (Comment, Reason) may hold spaces
        pairs = re.split(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)", proc.stdout.strip())
        return dict(pair.split("=", 1) for pair in pairs if "=" in pair)

    def wait_job(self, job_id: str, states: tuple[str, ...], *, timeout: float) -> dict[str, str]:
        seen: dict[str, str] = {}

        def reached() -> bool:
            seen.clear()
            seen.update(self.job(job_id))
            return seen.get("JobState") in states

        try:
            wait_for(reached, timeout=timeout, what=f"job {job_id} in {'/'.join(states)}", interval=0.2)
        except ServiceError as err:
            raise ServiceError(f"{err} (last: {seen.get('JobState')} {seen.get('Reason')})\n{self.logs()}") from None
        return dict(seen)

    def job_processes(self, job_id: str) -> list[int]:
        """PIDs of the slurmstepd processes of a job on this node (its steps not yet done)."""
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(f"slurmstepd: [{job_id}.".encode()):
                pids.append(int(proc.name))
        return pids

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", *(f"slurmd-{n}.log" for n in self.nodes)):
            tail = log_tail(self.dir / "log" / name, 15)
            if tail:
                parts.append(f"--- {name} ---\n{tail}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop every job, then the daemons, each by its own PID (children of this process)."""
        if self.slurmctld.running:
            self.run("scancel", "--full", "--user", str(os.getuid()))
        for daemon in (*self.daemons.values(), self.slurmctld, self.munged):
            daemon.stop()

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SSHD_CONF = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv SLURM_CONF TRAINOPS_VENV
"""

_SSH_CONF = """\
Host *
  IdentityFile {dir}/id
  IdentitiesOnly yes
  UserKnownHostsFile {dir}/known_hosts
  StrictHostKeyChecking yes
  SendEnv SLURM_CONF TRAINOPS_VENV
"""

SSH_INSTALL = "apt-get install -y openssh-server openssh-client (or scripts/install-test-deps.sh)"


class SshServer(_ManagedProcess):
    """sshd on a free loopback port with its own host key and one authorized client key: a
    stand-in login host. ``ssh_command`` is the client command that reaches it (its own config
    file: key, known host, SLURM_CONF and TRAINOPS_VENV sent along)."""

    name = "sshd"

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        super().__init__(self.dir / "sshd.log")
        self.port = 0

    @property
    def ssh_command(self) -> str:
        return f"{require('ssh', SSH_INSTALL)} -F {self.dir / 'ssh_config'}"

    def start(self) -> None:
        sshd = require("sshd", SSH_INSTALL)
        keygen = require("ssh-keygen", SSH_INSTALL)
        self.dir.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "id"):
            if not (self.dir / key).exists():
                subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / key)], check=True)
        (self.dir / "authorized_keys").write_text((self.dir / "id.pub").read_text())
        self.port = free_port()
        host_pub = (self.dir / "host_key.pub").read_text().split()
        (self.dir / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        (self.dir / "sshd_config").write_text(_SSHD_CONF.format(port=self.port, dir=self.dir))
        (self.dir / "ssh_config").write_text(_SSH_CONF.format(dir=self.dir))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self._spawn([sshd, "-D", "-e", "-f", str(self.dir / "sshd_config")])
        probe = [*self.ssh_command.split(), "-o", "BatchMode=yes", "-p", str(self.port), "root@127.0.0.1", "true"]
        wait_for(
            lambda: subprocess.run(probe, capture_output=True, timeout=20).returncode == 0,
            timeout=30,
            what="sshd",
            proc=self.proc,
            log_path=self.log_path,
            interval=0.2,
        )
