"""The SLO stack of the tests, real parts on loopback: vLLM stand-ins serving vLLM's metric names and
histogram buckets, a Prometheus that scrapes them and evaluates trainops' rules, and an
Alertmanager that delivers to `trainops alerts serve`.

`VllmStandIn` is one engine replica's /metrics as vLLM's v1 Prometheus logger writes it (the
series of vllm/v1/metrics/loggers.py: `vllm:time_to_first_token_seconds`,
`vllm:inter_token_latency_seconds`, `vllm:e2e_request_latency_seconds` with vLLM's own bucket
edges, `vllm:request_success_total` by finished_reason, labels model_name and engine). Every
scrape adds `per_scrape` finished requests whose TTFT is `ttft`, each token `itl` apart — the
test sets them; nothing is sampled, so the SLIs are exact.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import yaml

from trainops_testing.prometheus import serve_metrics_text
from trainops_testing.services import LOOPBACK, _http_status, _ManagedProcess, free_port, require, wait_for

# vLLM's bucket edges (vllm/v1/metrics/loggers.py), written here as vLLM writes them, not imported
TTFT_EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
              40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_EDGES = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0)  # fmt: skip
E2E_EDGES = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
             960.0, 1920.0, 7680.0)  # fmt: skip
TOKENS = 16  # output tokens per request


class _Histogram:
    def __init__(self, name: str, edges: tuple[float, ...]) -> None:
        self.name, self.edges = name, edges
        self.counts = [0] * len(edges)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float, n: int) -> None:
        for i, edge in enumerate(self.edges):
            if value <= edge:
                self.counts[i] += n
        self.total += n
        self.sum += value * n

    def lines(self, labels: str) -> list[str]:
        out = [f"# HELP {self.name} Histogram.", f"# TYPE {self.name} histogram"]
        pairs = zip(self.edges, self.counts, strict=True)
        out += [f'{self.name}_bucket{{{labels},le="{edge!r}"}} {c}.0' for edge, c in pairs]
        out.append(f'{self.name}_bucket{{{labels},le="+Inf"}} {self.total}.0')
        out.append(f"{self.name}_count{{{labels}}} {self.total}.0")
        out.append(f"{self.name}_sum{{{labels}}} {self.sum}")
        return out


class VllmStandIn:
    """/metrics of one vLLM replica on a free loopback port, in a thread."""

    def __init__(self, model: str = "tiny-llm") -> None:
        self.labels = f'engine="0",model_name="{model}"'
        self.ttft = 0.2
        self.itl = 0.02
        self.per_scrape = 50
        self.failed_per_scrape = 0
        self.scrapes = 0
        self._ttft = _Histogram("vllm:time_to_first_token_seconds", TTFT_EDGES)
        self._itl = _Histogram("vllm:inter_token_latency_seconds", ITL_EDGES)
        self._e2e = _Histogram("vllm:e2e_request_latency_seconds", E2E_EDGES)
        self._finished = {"stop": 0, "length": 0, "abort": 0}
        self._lock = threading.Lock()
        self.server = serve_metrics_text(self.render)
        self.port = self.server.server_address[1]
        self.target = f"{LOOPBACK}:{self.port}"

    def render(self) -> str:
        with self._lock:
            self.scrapes += 1
            n = self.per_scrape
            self._ttft.observe(self.ttft, n)
            self._itl.observe(self.itl, n * (TOKENS - 1))
            self._e2e.observe(self.ttft + self.itl * (TOKENS - 1), n)
            self._finished["stop"] += n - self.failed_per_scrape
            self._finished["abort"] += self.failed_per_scrape
            lines = ["# HELP vllm:request_success_total Count of successfully processed requests.",
                     "# TYPE vllm:request_success_total counter"]  # fmt: skip
            lines += [f'vllm:request_success_total{{{self.labels},finished_reason="{r}"}} {c}.0'
                      for r, c in self._finished.items()]  # fmt: skip
            for histogram in (self._ttft, self._itl, self._e2e):
                lines += histogram.lines(self.labels)
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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


class RulePrometheus(_ManagedProcess):
    """Debian's prometheus: scrapes the stand-ins (each target labelled as a ServiceMonitor on its
    Service would label it), evaluates a rule file and sends alerts to an Alertmanager."""

    name = "prometheus"

    def __init__(self, data_dir: Path, *, targets: dict[str, list[str]], rules: dict[str, Any],
                 alertmanager: str | None, interval: str = "1s", port: int = 0) -> None:  # fmt: skip
        self.data_dir = data_dir
        self.targets = targets  # service label → host:port
        self.rules = rules
        self.alertmanager = alertmanager
        self.interval = interval
        self.port = port  # 0: a free one at start
        super().__init__(data_dir / "prometheus.log")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        binary = require("prometheus", "apt-get install -y prometheus")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "rules.yml").write_text(yaml.safe_dump(self.rules, sort_keys=False))
        config: dict[str, Any] = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(self.data_dir / "rules.yml")],
            "scrape_configs": [
                {"job_name": "engines", "static_configs": [{"targets": targets, "labels": {"service": service}}
                                                            for service, targets in self.targets.items()]},
            ],
        }  # fmt: skip
        if self.alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        (self.data_dir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = self.port or free_port()
        t0 = time.monotonic()
        self._spawn([binary, f"--config.file={self.data_dir / 'prometheus.yml'}",
                     f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                     f"--web.listen-address={LOOPBACK}:{self.port}"])  # fmt: skip
        wait_for(lambda: _http_status(f"{self.url}/-/ready") == 200, timeout=60, what="prometheus",
                 proc=self.proc, log_path=self.log_path)  # fmt: skip
        self.startup_seconds = time.monotonic() - t0

    def query(self, promql: str) -> list[dict[str, Any]]:
        import requests

        data = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).json()
        result: list[dict[str, Any]] = data["data"]["result"]
        return result
