"""Git's smart HTTP transport on loopback: `git http-backend` behind a tiny CGI server.

The GitOps repo of the simulated cluster is served this way so that Argo CD's repo-server
clones and polls it over a real git transport (`http://127.0.0.1:PORT/NAME.git`), and
trainops pushes to the same URL. Every bare repository under the root is served
(GIT_HTTP_EXPORT_ALL); pushes are accepted where the repository sets `http.receivepack`
(`bare_repo` does). Plain HTTP, loopback only.

Run as a process (what `scripts/kube-sim.sh` and the fixtures do):

    python3 trainops_testing/githttp.py --root DIR --port PORT
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"


def bare_repo(root: Path, name: str) -> Path:
    """A bare repository `root/name` that accepts pushes over HTTP (idempotent)."""
    path = root / name
    if not path.exists():
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "http.receivepack", "true"], check=True)
    return path


def _handler(root: Path, git: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def _cgi(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": "HTTP/1.0",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": url.path,
                "QUERY_STRING": url.query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": self.client_address[0],
                "REMOTE_USER": "trainops",
            }
            for header in ("Content-Encoding", "Git-Protocol"):
                if self.headers.get(header):
                    env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
            done = subprocess.run([git, "http-backend"], input=body, env=env, capture_output=True, check=False)
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = done.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            if done.returncode != 0 and not done.stdout:
                status, payload = 500, done.stderr
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _cgi
        do_POST = _cgi

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"githttp: {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

    return Handler


def serve(root: Path, port: int) -> None:
    git = shutil.which("git")
    if git is None:
        raise SystemExit("githttp: git not found: apt-get install -y git")
    server = ThreadingHTTPServer((LOOPBACK, port), _handler(root, git))
    sys.stderr.write(f"githttp: serving {root} on http://{LOOPBACK}:{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(args.root.resolve(), args.port)


if __name__ == "__main__":
    main()
