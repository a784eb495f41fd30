"""Slurm's own commands — sbatch, scontrol, scancel — run here or on a login host over ssh.

No accounting daemon is needed: a job's state comes from `scontrol show job -o`, which
knows every job slurmctld still holds (MinJobAge after it ends). Over ssh, every argument
is quoted for the remote shell, the script goes to sbatch on stdin, and ssh runs in batch
mode (keys or an agent; it never prompts); $TRAINOPS_SSH_COMMAND replaces `ssh` (options,
a config file), as GIT_SSH_COMMAND does for git.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass

from trainops.errors import InputError, NotFoundError, RemoteError

log = logging.getLogger(__name__)

TIMEOUT = 60.0
SSH_COMMAND_ENV = "TRAINOPS_SSH_COMMAND"
_JOB_ID = re.compile(r"^([0-9]+)(;[^\s]*)?$")
_SSH_FAILED = 255
# sbatch's own words for a request the cluster refuses (what to change is in the manifest)
_REFUSED = (
    "invalid partition",
    "time limit",
    "invalid account",
    "invalid qos",
    "node configuration is not available",
    "invalid feature",
    "more processors requested than permitted",
    "invalid generic resource",
    "memory specification",
    "invalid job",
    "invalid node",
    "requested node",
    "access/permission denied",
    "invalid --",
)


@dataclass(frozen=True)
class SlurmHost:
    """Where Slurm's commands run: here (login_host None) or on a login host over ssh."""

    login_host: str | None = None
    submit_dir: str | None = None  # sbatch's directory there; None: the caller's (here) or the home (ssh)

    @property
    def where(self) -> str:
        return f"on {self.login_host}" if self.login_host else "here"

    def argv(self, command: list[str], *, cwd: str | None = None) -> list[str]:
        if self.login_host is None:
            return command
        target, _, port = self.login_host.partition(":")
        remote = " ".join(shlex.quote(word) for word in command)
        remote = f"{TIME_FORMAT_ENV}={shlex.quote(TIME_FORMAT)} {remote}"
        if cwd:
            remote = f"cd {shlex.quote(cwd)} && {remote}"
        ssh = [*ssh_command(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
        if port:
            ssh += ["-p", port]
        return [*ssh, "--", target, remote]

    def run(
        self, command: list[str], *, stdin: str | None = None, cwd: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = self.argv(command, cwd=cwd)
        if shutil.which(argv[0]) is None:
            what = "ssh" if self.login_host else command[0]
            raise NotFoundError(
                f"{what} is not installed here",
                hint="install slurm-client (or set train.slurm.loginHost to run Slurm's commands on a login node)"
                if not self.login_host
                else "install openssh-client",
            )
        try:
            return subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                check=False,
                timeout=TIMEOUT,
                cwd=None if self.login_host else cwd,
                env={**os.environ, TIME_FORMAT_ENV: TIME_FORMAT},
            )
        except subprocess.TimeoutExpired:
            raise RemoteError(
                f"`{' '.join(command)}` {self.where} did not answer in {TIMEOUT:.0f} s",
                hint="check that slurmctld is up (`scontrol ping`)",
            ) from None

    def failed(self, command: list[str], proc: subprocess.CompletedProcess[str]) -> RemoteError:
        text = one_line(proc.stderr or proc.stdout) or f"exit status {proc.returncode}"
        if self.login_host and proc.returncode == _SSH_FAILED:
            return RemoteError(
                f"ssh to {self.login_host} failed: {text}",
                hint="check train.slurm.loginHost and that `ssh -o BatchMode=yes HOST true` works",
            )
        return RemoteError(
            f"{command[0]} {self.where} failed: {text}", hint="check that slurmctld is up (`scontrol ping`)"
        )


TIME_FORMAT_ENV = "SLURM_TIME_FORMAT"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # Slurm's times with their offset, whatever the host's zone


def ssh_command() -> list[str]:
    """`ssh`, or $TRAINOPS_SSH_COMMAND split as a shell would (as git's GIT_SSH_COMMAND)."""
    text = os.environ.get(SSH_COMMAND_ENV, "").strip()
    return shlex.split(text) if text else ["ssh"]


def one_line(text: str) -> str:
    """A tool's message on one line: its non-empty lines joined."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def sbatch(host: SlurmHost, *, script: str, cwd: str | None, hold: bool) -> str:
    """Submit script (on stdin); the job id. A request the cluster refuses is bad input."""
    command = ["sbatch", "--parsable"]
    if hold:
        command.append("--hold")
    proc = host.run(command, stdin=script, cwd=cwd)
    if proc.returncode != 0:
        text = one_line(proc.stderr or proc.stdout)
        if any(word in text.lower() for word in _REFUSED):
            raise InputError(
                f"sbatch refused the job: {text}",
                hint="change train.slurm (partition, time, account, qos, constraint) or train.queue/nodes/resources "
                "to what the cluster offers (`sinfo`), then submit again",
            )
        raise host.failed(command, proc)
    match = _JOB_ID.match(proc.stdout.strip())
    if match is None:
        raise RemoteError(f"sbatch {host.where} printed no job id: {one_line(proc.stdout)!r}")
    return match.group(1)


def show_job(host: SlurmHost, job_id: str) -> dict[str, str] | None:
    """`scontrol show job -o ID` as key=value fields; None when slurmctld does not know the job."""
    command = ["scontrol", "show", "job", "-o", job_id]
    proc = host.run(command)
    if proc.returncode != 0:
        if "invalid job id" in (proc.stderr + proc.stdout).lower():
            return None
        raise host.failed(command, proc)
    return parse_fields(proc.stdout)


def parse_fields(text: str) -> dict[str, str]:
    """scontrol's one-line `Key=Value Key=Value …`; a value runs to the next ` Key=`."""
    fields: dict[str, str] = {}
    key: str | None = None
    for word in text.strip().split(" "):
        name, eq, value = word.partition("=")
        if eq and re.match(r"^[A-Za-z][A-Za-z0-9_:/]*$", name):
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + word
    return fields


def control(host: SlurmHost, *command: str) -> None:
    """scontrol/scancel for a job (release, requeue, update, cancel); a refusal is a RemoteError."""
    proc = host.run(list(command))
    if proc.returncode != 0:
        raise host.failed(list(command), proc)


def read_file(host: SlurmHost, path: str) -> str | None:
    """A file the job wrote (its output), read where the job's filesystem is; None if absent."""
    if host.login_host is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
    proc = host.run(["cat", "--", path])
    if proc.returncode != 0:
        if "no such file" in proc.stderr.lower():
            return None
        raise host.failed(["cat", path], proc)
    return proc.stdout
