"""A kubeconfig that does not work, or a cluster that does not answer: one line, exit 6 (no
traceback); a missing kubeconfig: exit 4. Real sockets: a closed port, and a TLS server
whose certificate the kubeconfig's CA did not sign (401/403 are in test_cluster.py, against
the real API server)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from trainops_testing.cli import run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"


def _kubeconfig(path: Path, server: str, ca: Path | None = None) -> Path:
    cluster: dict[str, str] = {"server": server}
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "tiny-llm"}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[str]:
    """A TLS listener on loopback with a self-signed certificate (it completes no HTTP)."""
    cert, key = _self_signed(tmp_path, "server")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{port}"
    stop.set()
    listener.close()
    thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _fail_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_RETRY_BUDGET", "0")


def test_a_cluster_that_does_not_answer_is_one_line_exit_6(tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{_free_port()}")
    out = run("validate", "-f", str(EXAMPLE), "--kubeconfig", str(config))
    assert out.code == 6, out.stderr
    assert out.stderr.count("\n") == 1
    assert "does not answer" in out.stderr and "Traceback" not in out.stderr


def test_a_certificate_the_kubeconfig_does_not_trust_is_a_tls_failure(tmp_path: Path, tls_server: str) -> None:
    other_ca, _ = _self_signed(tmp_path, "other")
    config = _kubeconfig(tmp_path / "kubeconfig", tls_server, ca=other_ca)
    out = run("train", "status", "-f", str(EXAMPLE), "--kubeconfig", str(config))
    assert out.code == 6, out.stderr
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("Error: TLS failure talking to the API server at " + tls_server)


def test_a_missing_kubeconfig_or_context_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    out = run("train", "status", "-f", str(EXAMPLE))
    assert out.code == 4 and f"no kubeconfig at {tmp_path / 'nowhere'} (from $KUBECONFIG)" in out.stderr
    out = run("train", "status", "-f", str(EXAMPLE), "--kubeconfig", str(tmp_path / "given"))
    assert out.code == 4 and f"no kubeconfig at {tmp_path / 'given'} (from --kubeconfig)" in out.stderr
    config = _kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    out = run("train", "logs", "r1", "-f", str(EXAMPLE), "--kubeconfig", str(config), "--context", "prod")
    assert out.code == 3 and "Context 'prod' not found" in out.stderr
