"""A real Prometheus (Debian's `prometheus`) on a free loopback port, scraping a loopback exporter
that serves vLLM's metric names with values the test sets.

An exporter can carry extra labels on every series (`labels`): the cluster tests run one per
serving ReplicaSet, standing in for the vLLM pods that kwok simulates (they serve nothing),
labelled with the ReplicaSet's pod-template hash and `source="kwok-stand-in"`.

The exporter's latency histogram grows on every scrape by `per_scrape` requests that each took
`latency` seconds, so `histogram_quantile(0.95, … rate(…_bucket[…]))` measures `latency`
(interpolated inside its bucket), and `vllm:num_requests_running` is a gauge.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from trainops_testing.services import (
    LOOPBACK,
    ServiceError,
    _http_status,
    _ManagedProcess,
    free_port,
    require,
    wait_for,
)

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
HISTOGRAMS = ("vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds")


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


class VllmExporter:
    """/metrics on a free loopback port, in a thread."""

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        extra = {"model_name": "tiny-llm", **(labels or {})}
        self._labels = ",".join(f'{k}="{v}"' for k, v in extra.items())
        self.latency = 0.2
        self.running = 3
        self.per_scrape = 20
        self.scrapes = 0
        self._counts = dict.fromkeys(BUCKETS, 0)
        self._total = 0
        self._sum = 0.0
        self._lock = threading.Lock()
        self.server = serve_metrics_text(self.render)
        self.port = self.server.server_address[1]

    def render(self) -> str:
        with self._lock:
            self.scrapes += 1
            for bound in BUCKETS:
                if self.latency <= bound:
                    self._counts[bound] += self.per_scrape
            self._total += self.per_scrape
            self._sum += self.latency * self.per_scrape
            lines = [
                "# TYPE vllm:num_requests_running gauge",
                f"vllm:num_requests_running{{{self._labels}}} {self.running}",
            ]
            for name in HISTOGRAMS:
                lines.append(f"# TYPE {name} histogram")
                for bound in BUCKETS:
                    lines.append(f'{name}_bucket{{{self._labels},le="{bound}"}} {self._counts[bound]}')
                lines.append(f'{name}_bucket{{{self._labels},le="+Inf"}} {self._total}')
                lines.append(f"{name}_sum{{{self._labels}}} {self._sum}")
                lines.append(f"{name}_count{{{self._labels}}} {self._total}")
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Prometheus(_ManagedProcess):
    name = "prometheus"

    def __init__(self, data_dir: Path, target: str | list[str], *, start_timeout: float = 60.0) -> None:
        self.data_dir = data_dir
        self.targets = [target] if isinstance(target, str) else list(target)
        self.port: int | None = None
        self.start_timeout = start_timeout
        super().__init__(data_dir / "prometheus.log")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        binary = require("prometheus", "apt-get install -y prometheus")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: vllm\n    static_configs: [{{targets: {self.targets!r}}}]\n"
        )
        self.port = free_port()
        self._spawn(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
            ]
        )
        t0 = time.monotonic()
        wait_for(
            lambda: _http_status(f"{self.url}/-/ready") == 200,
            timeout=self.start_timeout,
            what=f"prometheus on {LOOPBACK}:{self.port}",
            proc=self.proc,
            log_path=self.log_path,
        )
        self.startup_seconds = time.monotonic() - t0


def has_data(url: str, query: str) -> bool:
    import requests

    data = requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
    result = data["data"]["result"]
    return bool(result) and result[0]["value"][1] not in ("NaN", "+Inf")


__all__ = ["BUCKETS", "Prometheus", "ServiceError", "VllmExporter", "has_data"]
