"""Prometheus and Alertmanager as real processes (Debian's `prometheus`,
`prometheus-alertmanager`) on free loopback ports — the one home of both for tests and
benchmarks — and `serve_metrics_text`, the /metrics endpoint the exporters' stand-ins
(trainops_testing.engine_metrics) serve from.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.services import (
    LOOPBACK,
    ServiceError,
    _http_status,
    _ManagedProcess,
    free_port,
    require,
    wait_for,
)


def serve_metrics_text(render: Callable[[], str]) -> ThreadingHTTPServer:
    """A /metrics endpoint on a free loopback port, in a daemon thread: every GET of /metrics
    answers `render()` in Prometheus' text format (the stand-ins of the engines' exporters)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = render().encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Prometheus(_ManagedProcess):
    """Debian's prometheus on a free loopback port (or `port`), scraping every `interval`.

    What it scrapes, in one job `job`:
    - `targets`: host:port strings; or service → host:port strings, each target labelled
      `service` as a ServiceMonitor on that Service would label it;
    - `file_sd`: the targets of `targets_file` (file_sd JSON, refreshed every second), which
      the test rewrites while Prometheus runs (`set_targets`).
    `rules`: a rule file's content, evaluated every `interval`; `alertmanager`: host:port
    its alerts go to.
    """

    name = "prometheus"

    def __init__(
        self,
        data_dir: Path,
        targets: str | list[str] | dict[str, list[str]] | None = None,
        *,
        file_sd: bool = False,
        rules: dict[str, Any] | None = None,
        alertmanager: str | None = None,
        interval: str = "1s",
        job: str = "vllm",
        port: int = 0,
        start_timeout: float = 60.0,
    ) -> None:
        self.data_dir = data_dir
        self.targets = [targets] if isinstance(targets, str) else (targets or [])
        self.file_sd = file_sd
        self.targets_file = data_dir / "targets.json"
        self.rules = rules
        self.alertmanager = alertmanager
        self.interval = interval
        self.job = job
        self.port = port  # 0: a free one at start
        self.start_timeout = start_timeout
        self.startup_seconds = 0.0
        super().__init__(data_dir / "prometheus.log")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _scrape(self) -> dict[str, Any]:
        job: dict[str, Any] = {"job_name": self.job}
        if self.file_sd:
            job["file_sd_configs"] = [{"files": [str(self.targets_file)], "refresh_interval": "1s"}]
        elif isinstance(self.targets, dict):
            job["static_configs"] = [
                {"targets": list(targets), "labels": {"service": service}} for service, targets in self.targets.items()
            ]
        else:
            job["static_configs"] = [{"targets": list(self.targets)}]
        return job

    def start(self) -> None:
        binary = require("prometheus", "apt-get install -y prometheus")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "scrape_configs": [self._scrape()],
        }
        if self.file_sd:
            self.targets_file.write_text("[]")
        if self.rules is not None:
            (self.data_dir / "rules.yml").write_text(yaml.safe_dump(self.rules, sort_keys=False))
            config["rule_files"] = [str(self.data_dir / "rules.yml")]
        if self.alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        (self.data_dir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = self.port or free_port()
        started = time.monotonic()
        self._spawn(
            [
                binary,
                f"--config.file={self.data_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
            ]
        )
        wait_for(
            lambda: _http_status(f"{self.url}/-/ready") == 200,
            timeout=self.start_timeout,
            what=f"prometheus on {LOOPBACK}:{self.port}",
            proc=self.proc,
            log_path=self.log_path,
        )
        self.startup_seconds = time.monotonic() - started

    def set_targets(self, groups: list[dict[str, Any]]) -> None:
        """With `file_sd`: the target groups ({"targets": [...], "labels": {...}}) to scrape
        from now on (written whole, then renamed: Prometheus never reads half a file)."""
        partial = self.targets_file.with_suffix(".tmp")
        partial.write_text(json.dumps(groups))
        partial.replace(self.targets_file)

    def query(self, promql: str) -> list[dict[str, Any]]:
        import requests

        data = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).json()
        result: list[dict[str, Any]] = data["data"]["result"]
        return result


class Alertmanager(_ManagedProcess):
    """Debian's prometheus-alertmanager delivering every alert to one webhook, with a Bearer token."""

    name = "alertmanager"

    def __init__(self, data_dir: Path, *, webhook: str, token: str) -> None:
        self.data_dir = data_dir
        self.webhook = webhook
        self.token = token
        self.port = 0
        super().__init__(data_dir / "alertmanager.log")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        binary = require("prometheus-alertmanager", "apt-get install -y prometheus-alertmanager")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "route": {"receiver": "trainops", "group_by": ["alertname", "slo", "service", "run"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "trainops", "webhook_configs": [{
                "url": self.webhook, "send_resolved": True,
                "http_config": {"authorization": {"type": "Bearer", "credentials": self.token}},
            }]}],
        }  # fmt: skip
        path = self.data_dir / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self._spawn([binary, f"--config.file={path}", f"--storage.path={self.data_dir / 'data'}",
                     f"--web.listen-address={LOOPBACK}:{self.port}", "--cluster.listen-address="])  # fmt: skip
        wait_for(lambda: _http_status(f"{self.url}/-/ready") == 200, timeout=60, what="alertmanager",
                 proc=self.proc, log_path=self.log_path)  # fmt: skip

    def alerts(self) -> list[dict[str, Any]]:
        import requests

        data: list[dict[str, Any]] = requests.get(f"{self.url}/api/v2/alerts", timeout=5).json()
        return data


def has_data(url: str, query: str) -> bool:
    import requests

    data = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
    result = data["data"]["result"]
    return bool(result) and result[0]["value"][1] not in ("NaN", "+Inf")


__all__ = ["Alertmanager", "Prometheus", "ServiceError", "has_data", "serve_metrics_text"]
