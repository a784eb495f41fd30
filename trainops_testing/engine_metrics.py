"""Stand-ins of the serving engines' Prometheus exporters (vLLM, SGLang), each on a free loopback
port in a thread, serving values the test sets.

`VllmExporter` serves vLLM's metric names with coarse buckets: its latency histograms grow on
every scrape by `per_scrape` requests that each took `latency` seconds, so
`histogram_quantile(0.95, … rate(…_bucket[…]))` measures `latency` (interpolated inside its
bucket), `vllm:request_success_total` counts them as finished (`finished_reason="stop"`, none
aborted: the availability SLI has its series), and `vllm:num_requests_running` is a gauge.
It can carry extra labels on every series (`labels`): the cluster tests run one per serving
ReplicaSet, standing in for the vLLM pods that kwok simulates (they serve nothing), labelled
with the ReplicaSet's pod-template hash and `source="kwok-stand-in"`.

`VllmStandIn` is one engine replica's /metrics as vLLM's v1 Prometheus logger writes it (the
series of vllm/v1/metrics/loggers.py: `vllm:time_to_first_token_seconds`,
`vllm:inter_token_latency_seconds`, `vllm:e2e_request_latency_seconds` with vLLM's own bucket
edges, `vllm:request_success_total` by finished_reason, labels model_name and engine). Every
scrape adds `per_scrape` finished requests whose TTFT is `ttft`, each token `itl` apart — the
test sets them; nothing is sampled, so the SLIs are exact.

`SglangStandIn` is the same for one SGLang server, as its TokenizerMetricsCollector writes it
(python/sglang/srt/metrics/collector.py: `sglang:time_to_first_token_seconds`,
`sglang:inter_token_latency_seconds`, `sglang:e2e_request_latency_seconds` with SGLang's default
bucket edges, the counters `sglang:num_requests_total` and `sglang:num_aborted_requests_total`,
labels model_name and engine_type).
"""

from __future__ import annotations

import threading

from trainops_testing.prometheus import serve_metrics_text
from trainops_testing.services import LOOPBACK

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
HISTOGRAMS = ("vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds")


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
                "# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{{self._labels},finished_reason="stop"}} {self._total}',
                f'vllm:request_success_total{{{self._labels},finished_reason="abort"}} 0',
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


class _StandIn:
    """/metrics of one engine replica on a free loopback port, in a thread: every scrape adds
    `per_scrape` finished requests (`failed_per_scrape` of them failed)."""

    prefix = ""
    edges: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]] = ((), (), ())

    def __init__(self, labels: str) -> None:
        self.labels = labels
        self.ttft = 0.2
        self.itl = 0.02
        self.per_scrape = 50
        self.failed_per_scrape = 0
        self.scrapes = 0
        ttft, itl, e2e = self.edges
        self._ttft = _Histogram(f"{self.prefix}:time_to_first_token_seconds", ttft)
        self._itl = _Histogram(f"{self.prefix}:inter_token_latency_seconds", itl)
        self._e2e = _Histogram(f"{self.prefix}:e2e_request_latency_seconds", e2e)
        self._lock = threading.Lock()
        self.server = serve_metrics_text(self.render)
        self.port = self.server.server_address[1]
        self.target = f"{LOOPBACK}:{self.port}"

    def counters(self, finished: int, failed: int) -> list[str]:
        raise NotImplementedError

    def render(self) -> str:
        with self._lock:
            self.scrapes += 1
            n = self.per_scrape
            self._ttft.observe(self.ttft, n)
            self._itl.observe(self.itl, n * (TOKENS - 1))
            self._e2e.observe(self.ttft + self.itl * (TOKENS - 1), n)
            lines = self.counters(n - self.failed_per_scrape, self.failed_per_scrape)
            for histogram in (self._ttft, self._itl, self._e2e):
                lines += histogram.lines(self.labels)
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class VllmStandIn(_StandIn):
    """/metrics of one vLLM replica: failed requests are `finished_reason="abort"`."""

    prefix = "vllm"
    edges = (TTFT_EDGES, ITL_EDGES, E2E_EDGES)

    def __init__(self, model: str = "tiny-llm") -> None:
        self._finished = {"stop": 0, "length": 0, "abort": 0}
        super().__init__(f'engine="0",model_name="{model}"')

    def counters(self, finished: int, failed: int) -> list[str]:
        self._finished["stop"] += finished
        self._finished["abort"] += failed
        lines = ["# HELP vllm:request_success_total Count of successfully processed requests.",
                 "# TYPE vllm:request_success_total counter"]  # fmt: skip
        return lines + [f'vllm:request_success_total{{{self.labels},finished_reason="{r}"}} {c}.0'
                        for r, c in self._finished.items()]  # fmt: skip


# SGLang's default bucket edges (python/sglang/srt/metrics/collector.py), written here as SGLang writes them
SGLANG_TTFT_EDGES = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                     400.0)  # fmt: skip
SGLANG_ITL_EDGES = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
                    0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip
SGLANG_E2E_EDGES = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                    400.0, 600.0, 1200.0, 1800.0, 2400.0)  # fmt: skip


class SglangStandIn(_StandIn):
    """/metrics of one SGLang server: every request counted in `sglang:num_requests_total` (an
    aborted one finishes too), the failed ones also in `sglang:num_aborted_requests_total`."""

    prefix = "sglang"
    edges = (SGLANG_TTFT_EDGES, SGLANG_ITL_EDGES, SGLANG_E2E_EDGES)

    def __init__(self, model: str = "tiny-llm", engine_type: str = "unified") -> None:
        self._requests = 0
        self._aborted = 0
        super().__init__(f'engine_type="{engine_type}",model_name="{model}"')

    def counters(self, finished: int, failed: int) -> list[str]:
        self._requests += finished + failed
        self._aborted += failed
        return [
            "# HELP sglang:num_requests_total Number of requests processed.",
            "# TYPE sglang:num_requests_total counter",
            f"sglang:num_requests_total{{{self.labels}}} {self._requests}.0",
            "# HELP sglang:num_aborted_requests_total Number of requests aborted.",
            "# TYPE sglang:num_aborted_requests_total counter",
            f"sglang:num_aborted_requests_total{{{self.labels}}} {self._aborted}.0",
        ]
