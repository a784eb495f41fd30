"""Real services for the trainops test suite: start, wait for readiness, stop.

Plain Python, no pytest: ``conftest.py`` wraps these in fixtures, and they can be used
from a REPL or a benchmark script as well.  Every service

* listens on a free loopback port (picked by binding port 0),
* is ready only when a real request to it succeeds (polled against a deadline),
* writes its output to a log file whose tail is put into every error message,
* stops with terminate, wait, then kill if it does not exit in time.

Nothing here modifies ``/etc``: Podman is pointed at its own config files through the
``CONTAINERS_*`` environment variables, which ``PodmanService.env`` exposes so that tests
can run the ``podman`` and ``skopeo`` CLIs against the same storage and registries.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

__all__ = [
    "INSTALL_SCRIPT",
    "DistributionRegistry",
    "MissingDependency",
    "MotoS3",
    "PodmanService",
    "ServiceError",
    "bare_git_repo",
    "build_busybox_image",
    "build_image",
    "free_port",
    "git_env",
    "log_tail",
    "push_image",
    "require",
    "require_file",
    "sha256_digest",
    "wait_for",
]

INSTALL_SCRIPT = "scripts/install-test-deps.sh"
LOOPBACK = "127.0.0.1"
_Service = TypeVar("_Service", bound="_ManagedProcess")


class ServiceError(RuntimeError):
    """A service could not be started, did not become ready, or failed an operation."""


class MissingDependency(ServiceError):
    """A binary or file a service needs is not installed; the message names the fix."""


# --------------------------------------------------------------------------- helpers


def require(binary: str, install_hint: str) -> str:
    """Return the absolute path of ``binary`` or raise ``MissingDependency``.

    ``install_hint`` is the exact command that installs it, e.g.
    ``"apt-get install -y docker-registry"``; the message reads
    ``docker-registry not found: apt-get install -y docker-registry``.
    """
    path = shutil.which(binary)
    if path is None:
        raise MissingDependency(f"{binary} not found: {install_hint} (or run {INSTALL_SCRIPT} as root)")
    return path


def require_file(path: str | Path, install_hint: str) -> Path:
    """Like ``require`` for a file that a package ships (e.g. ``/etc/containers/policy.json``)."""
    p = Path(path)
    if not p.exists():
        raise MissingDependency(f"{p} not found: {install_hint} (or run {INSTALL_SCRIPT} as root)")
    return p


def free_port(host: str = LOOPBACK) -> int:
    """Ask the kernel for a free TCP port on ``host`` (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(
    condition: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log_path: Path | None = None,
    interval: float = 0.05,
) -> float:
    """Poll ``condition`` until it returns True; return the seconds it took.

    Raises ``ServiceError`` (with the log tail) when the deadline passes or when ``proc``
    exits first.  Between attempts it waits on the process itself, so a crash is noticed
    at once rather than after the deadline.
    """
    start = time.monotonic()
    deadline = start + timeout
    last_error = ""
    while True:
        try:
            if condition():
                return time.monotonic() - start
        except Exception as exc:  # the condition is a probe: any failure means "not yet"
            last_error = f"{type(exc).__name__}: {exc}"
        if proc is not None and proc.poll() is not None:
            raise ServiceError(
                f"{what}: process exited with code {proc.returncode} before it was ready" + _tail_suffix(log_path)
            )
        now = time.monotonic()
        if now >= deadline:
            detail = f" (last probe error: {last_error})" if last_error else ""
            raise ServiceError(f"{what}: not ready after {timeout:.0f}s{detail}" + _tail_suffix(log_path))
        pause = min(interval, deadline - now)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=pause)
        else:
            time.sleep(pause)  # pacing between probes of a condition, not a fixed delay


def log_tail(path: Path | None, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file ('' if there is none)."""
    if path is None or not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(0, io.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        data = f.read().decode("utf-8", "replace")
    return "\n".join(data.splitlines()[-lines:])


def _tail_suffix(path: Path | None) -> str:
    tail = log_tail(path)
    return f"\n--- last lines of {path} ---\n{tail}" if tail else ""


def _http_status(url: str, timeout: float = 2.0) -> int:
    """Status code of a GET (HTTP errors count as answers); raises if nothing answers."""
    context = None
    if url.startswith("https://"):  # readiness only: the test's own self-signed certificate
        import ssl

        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            status: int = resp.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


class _ManagedProcess:
    """One long-running child process with a log file and a clean stop."""

    name = "service"
    stop_timeout = 10.0

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.startup_seconds: float | None = None
        atexit.register(self.stop)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _spawn(self, cmd: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        if self.proc is not None and self.proc.poll() is None:
            raise ServiceError(f"{self.name} is already running (pid {self.proc.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # a Ctrl-C in the terminal does not reach it first
        )

    def stop(self) -> None:
        """Terminate, wait, kill on timeout.  Safe to call twice or before start."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.stop_timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self, lines: int = 40) -> str:
        """The tail of this service's log."""
        return log_tail(self.log_path, lines)

    def __enter__(self: _Service) -> _Service:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


# ------------------------------------------------------------------ OCI registry


class DistributionRegistry(_ManagedProcess):
    """CNCF Distribution (Debian ``docker-registry``) on a free loopback port.

    ``data_dir`` holds the blob storage (under ``docker/registry/v2``), ``config.yml`` and
    ``registry.log``.  ``restart()`` keeps port and data.  ``http_secret`` is fixed by
    default so that an upload session begun before a restart can be finished after it (as
    with any multi-instance deployment); pass ``None`` to let each start pick a random one,
    which makes earlier uploads fail with BLOB_UPLOAD_INVALID / BLOB_UPLOAD_UNKNOWN.
    """

    name = "docker-registry"

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int | None = None,
        http_secret: str | None = "trainops-test-registry-secret",
        start_timeout: float = 30.0,
        tls: tuple[Path, Path] | None = None,
        htpasswd: Path | None = None,
        auth_config: str | None = None,
    ) -> None:
        self.tls = tls  # (certificate, key): serve HTTPS
        self.htpasswd = htpasswd  # bcrypt htpasswd file: require Basic auth
        self.auth_config = auth_config  # a whole `auth:` section, e.g. token auth
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.http_secret = http_secret
        self.start_timeout = start_timeout
        self.config_path = self.data_dir / "config.yml"
        super().__init__(self.data_dir / "registry.log")

    @property
    def host(self) -> str:
        if self.port is None:
            raise ServiceError("registry has no port yet: call start()")
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    def _write_config(self) -> None:
        secret = f"\n  secret: {self.http_secret}" if self.http_secret else ""
        if self.tls:
            secret += f"\n  tls:\n    certificate: {self.tls[0]}\n    key: {self.tls[1]}"
        auth = f"auth:\n  htpasswd:\n    realm: trainops-test\n    path: {self.htpasswd}\n" if self.htpasswd else ""
        auth = self.auth_config or auth
        self.config_path.write_text(
            "version: 0.1\n"
            "log:\n  level: info\n"
            "storage:\n"
            f"  filesystem:\n    rootdirectory: {self.data_dir}\n"
            "  delete:\n    enabled: true\n"
            "  maintenance:\n    uploadpurging:\n      enabled: false\n"
            f"http:\n  addr: {self.host}{secret}\n" + auth
        )

    def _ready_statuses(self) -> tuple[int, ...]:
        return (401, 200) if self.htpasswd or self.auth_config else (200,)

    def start(self) -> None:
        binary = require("docker-registry", "apt-get install -y docker-registry")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pick_port = self.port is None
        attempts = 3 if pick_port else 1
        t0 = time.monotonic()
        for attempt in range(attempts):
            if pick_port:
                self.port = free_port()
            self._write_config()
            self._spawn([binary, "serve", str(self.config_path)])
            try:
                wait_for(
                    lambda: _http_status(f"{self.url}/v2/") in self._ready_statuses(),
                    timeout=self.start_timeout,
                    what=f"docker-registry on {self.host}",
                    proc=self.proc,
                    log_path=self.log_path,
                )
                break
            except ServiceError:
                self.stop()
                # Another process took the port between free_port() and bind: try another.
                if attempt + 1 < attempts and "address already in use" in self.log().lower():
                    continue
                raise
        self.startup_seconds = time.monotonic() - t0

    def restart(self) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop()
        self.start()


# ---------------------------------------------------------------------------- S3


class MotoS3(_ManagedProcess):
    """moto's S3 server (``python -m moto.server``) on a free loopback port."""

    name = "moto_server"
    access_key = "testing"
    secret_key = "testing"
    region = "us-east-1"

    def __init__(self, log_dir: str | Path | None = None, *, start_timeout: float = 60.0) -> None:
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="moto-"))
        self.port: int | None = None
        self.start_timeout = start_timeout
        super().__init__(self.log_dir / "moto.log")

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise ServiceError("moto server has no port yet: call start()")
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """AWS_* variables that point boto3 (and the AWS CLI) at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }

    def _command(self) -> list[str]:
        try:
            import moto.server  # noqa: F401
        except ImportError:
            script = shutil.which("moto_server")
            if script is None:
                raise MissingDependency("moto_server not found: python -m pip install 'moto[server]'") from None
            return [script]
        return [sys.executable, "-m", "moto.server"]

    def start(self) -> None:
        cmd = self._command()
        t0 = time.monotonic()
        for attempt in range(3):
            self.port = free_port()
            self._spawn([*cmd, "-H", LOOPBACK, "-p", str(self.port)])
            try:
                wait_for(
                    lambda: _http_status(self.endpoint_url) > 0,
                    timeout=self.start_timeout,
                    what=f"moto_server on port {self.port}",
                    proc=self.proc,
                    log_path=self.log_path,
                )
                break
            except ServiceError:
                self.stop()
                if attempt < 2 and "address already in use" in self.log().lower():
                    continue
                raise
        self.startup_seconds = time.monotonic() - t0

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a random ``trainops-test-…`` name by default) and return its name."""
        name = name or f"trainops-test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def reset(self) -> None:
        """Drop all of moto's state (every bucket) through its ``/moto-api/reset`` endpoint."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            if resp.status != 200:
                raise ServiceError(f"moto reset returned HTTP {resp.status}")


# ------------------------------------------------------------------------ Podman

_CONTAINERS_CONF = """\
# Written by trainops_testing/services.py; used through CONTAINERS_CONF, /etc is not touched.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
default_sysctls = []
netns = "host"
log_driver = "k8s-file"

[network]
network_config_dir = "{network_dir}"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
tmp_dir = "{tmp_dir}"
"""

_STORAGE_CONF = """\
# Written by trainops_testing/services.py; used through CONTAINERS_STORAGE_CONF.
[storage]
driver = "vfs"
runroot = "{runroot}"
graphroot = "{graphroot}"
"""


class PodmanService(_ManagedProcess):
    """``podman system service`` on a unix socket, speaking the Docker Engine API.

    All configuration lives in ``workdir/conf`` and storage in ``workdir/storage`` (vfs
    driver).  ``env`` holds the ``CONTAINERS_*`` variables: pass ``{**os.environ,
    **svc.env}`` to any ``podman``/``skopeo`` subprocess, or use ``svc.podman(...)``.
    Each host:port in ``insecure_registries`` may be pushed to and pulled from over
    plain HTTP.
    """

    name = "podman system service"

    def __init__(
        self,
        workdir: str | Path,
        insecure_registries: Sequence[str] = (),
        *,
        storage_dir: str | Path | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.insecure_registries = list(insecure_registries)
        self.storage_dir = Path(storage_dir).resolve() if storage_dir else self.workdir / "storage"
        self.start_timeout = start_timeout
        self.conf_dir = self.workdir / "conf"
        sock = self.workdir / "podman.sock"
        if len(str(sock)) > 100:  # sun_path holds 108 bytes
            sock = Path(tempfile.mkdtemp(prefix="podman-")) / "podman.sock"
        self.socket_path = sock
        super().__init__(self.workdir / "podman.log")

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def env(self) -> dict[str, str]:
        """CONTAINERS_* variables that give podman/skopeo this service's config."""
        return {
            "CONTAINERS_CONF": str(self.conf_dir / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.conf_dir / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.conf_dir / "registries.conf"),
        }

    def subprocess_env(self) -> dict[str, str]:
        """``os.environ`` plus ``env`` and ``DOCKER_HOST``: ready for ``subprocess``."""
        return {**os.environ, **self.env, "DOCKER_HOST": self.docker_host}

    def _check_dependencies(self) -> str:
        podman = require("podman", "apt-get install -y podman")
        require("runc", "apt-get install -y runc")
        require("conmon", "apt-get install -y conmon")
        require_file("/etc/containers/policy.json", "apt-get install -y golang-github-containers-common")
        return podman

    def write_config(self) -> None:
        for d in ("tmp", "networks"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "containers.conf").write_text(
            _CONTAINERS_CONF.format(tmp_dir=self.workdir / "tmp", network_dir=self.workdir / "networks")
        )
        (self.conf_dir / "storage.conf").write_text(
            _STORAGE_CONF.format(runroot=self.workdir / "runroot", graphroot=self.storage_dir / "graph")
        )
        blocks = "".join(f'\n[[registry]]\nlocation = "{host}"\ninsecure = true\n' for host in self.insecure_registries)
        (self.conf_dir / "registries.conf").write_text(
            "# Written by trainops_testing/services.py; used through CONTAINERS_REGISTRIES_CONF.\n"
            "unqualified-search-registries = []\n" + blocks
        )

    def start(self) -> None:
        podman = self._check_dependencies()
        t0 = time.monotonic()
        self.write_config()
        self.socket_path.unlink(missing_ok=True)
        self._spawn(
            [podman, "--log-level=info", "system", "service", "--time=0", self.docker_host],
            env={**os.environ, **self.env},
        )

        def pings() -> bool:
            if not self.socket_path.exists():
                return False
            client = self.client(timeout=5)
            try:
                return bool(client.ping())
            finally:
                client.close()

        wait_for(
            pings,
            timeout=self.start_timeout,
            what=f"podman service on {self.socket_path}",
            proc=self.proc,
            log_path=self.log_path,
        )
        self.startup_seconds = time.monotonic() - t0

    def client(self, timeout: int = 300) -> Any:
        """A ``docker.DockerClient`` for this service (close it when done)."""
        try:
            import docker
        except ImportError:
            raise MissingDependency("docker SDK not found: python -m pip install 'docker>=7'") from None
        return docker.DockerClient(base_url=self.docker_host, timeout=timeout)

    def podman(
        self, *args: str, check: bool = True, timeout: float = 300, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the ``podman`` CLI with this service's config; raise on failure if ``check``."""
        proc = subprocess.run(
            ["podman", *args],
            env=self.subprocess_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input.decode() if input is not None else None,
        )
        if check and proc.returncode != 0:
            raise ServiceError(f"podman {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        return proc

    def stop(self) -> None:
        """Remove leftover containers (their conmon outlives the API service), then stop."""
        if self.running:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    ["podman", "rm", "--all", "--force", "--time", "2"],
                    env=self.subprocess_env(),
                    capture_output=True,
                    timeout=60,
                )
        super().stop()


_PUSHED_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def push_image(client: Any, repository: str, tag: str) -> str:
    """Push ``repository:tag`` with the docker SDK; return the pushed manifest digest.

    The SDK reports push failures inside the progress stream instead of raising, so this
    reads the whole stream and raises ``ServiceError`` on any ``error`` entry.  Through
    podman the pushed manifest is Docker v2 schema 2, and its digest differs from the
    ``RepoDigests`` podman records locally (that one is of its own OCI form), so only the
    digest from the push stream names what the registry holds.
    """
    digest = ""
    lines: list[str] = []
    for item in client.images.push(repository, tag=tag, stream=True, decode=True):
        lines.append(str(item))
        if "error" in item or "errorDetail" in item:
            raise ServiceError(f"push of {repository}:{tag} failed: {item}")
        aux = item.get("aux") or {}
        if isinstance(aux, dict) and aux.get("Digest"):
            digest = str(aux["Digest"])
        # podman sends no aux entry, only docker's closing line "TAG: digest: sha256:… size: N"
        found = _PUSHED_DIGEST.search(str(item.get("status") or ""))
        if found and not digest:
            digest = found.group(1)
    if not digest:
        raise ServiceError(f"push of {repository}:{tag} reported no digest:\n" + "\n".join(lines))
    return digest


def _is_static_elf(path: Path) -> bool:
    """True for a 64-bit little-endian ELF file with no PT_INTERP (dynamic loader)."""
    with path.open("rb") as f:
        header = f.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return False
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(
        struct.unpack_from("<I", table, i * phentsize)[0] != 3  # PT_INTERP
        for i in range(phnum)
    )


BUSYBOX_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/usr/sbin", "/sbin", "/etc", "/root", "/var"]
RUN ["/bin/busybox", "--install", "-s"]
RUN ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"]
ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin
CMD ["/bin/sh"]
"""


def build_busybox_image(
    client: Any,
    tag: str = "localhost/trainops-test/busybox:latest",
    *,
    busybox: str | Path = "/bin/busybox",
    context_dir: str | Path | None = None,
) -> str:
    """Build a ``FROM scratch`` image holding Debian's static busybox; return ``tag``.

    Every applet is linked in its usual place (``/bin/sh``, ``/bin/echo``, …), so a
    Dockerfile ``FROM <tag>`` can use shell-form ``RUN`` steps.  Nothing is pulled.
    """
    src = require_file(busybox, "apt-get install -y busybox-static")
    if not _is_static_elf(src.resolve()):
        raise MissingDependency(f"{src} is not statically linked: apt-get install -y busybox-static")
    ctx = Path(context_dir) if context_dir else Path(tempfile.mkdtemp(prefix="busybox-ctx-"))
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src.resolve(), ctx / "busybox")
    (ctx / "Dockerfile").write_text(BUSYBOX_DOCKERFILE)
    build_image(client, ctx, tag)
    return tag


def build_image(client: Any, context_dir: str | Path, tag: str) -> Any:
    """``client.images.build`` with the build log in the error message on failure."""
    import docker.errors

    try:
        image, _logs = client.images.build(path=str(context_dir), tag=tag, rm=True)
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream") or chunk) for chunk in exc.build_log)
        raise ServiceError(f"build of {tag} failed: {exc}\n{log}") from exc
    return image


# --------------------------------------------------------------------------- git


def bare_git_repo(path: str | Path) -> Path:
    """``git init --bare`` at ``path`` with ``main`` as its default branch (HEAD)."""
    git = require("git", "apt-get install -y git")
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    subprocess.run([git, "init", "--bare", "--quiet", str(p)], check=True, env=git_env())
    subprocess.run(
        [git, "--git-dir", str(p), "symbolic-ref", "HEAD", "refs/heads/main"],
        check=True,
        env=git_env(),
    )
    return p


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for git subprocesses: a fixed identity, no user/system config."""
    env = dict(os.environ if base is None else base)
    env.update(
        GIT_AUTHOR_NAME="trainops tests",
        GIT_AUTHOR_EMAIL="tests@trainops.invalid",
        GIT_COMMITTER_NAME="trainops tests",
        GIT_COMMITTER_EMAIL="tests@trainops.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``, as OCI digests are written."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sigint_default() -> None:
    """``preexec_fn`` of a process a test interrupts with SIGINT: the signal back to its default
    action. A suite started as a background job of a shell without job control (`cmd &` in a
    script, `nohup`) inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored, so
    without this the child would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
