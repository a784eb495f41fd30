"""The training run's Prometheus metrics, served by its supervisor (`train run`, local and Slurm),
by the checkpoint sidecar of its pods and by `train watch` (Kubernetes).

Series (labels pipeline, run), the sources of the training SLOs (trainops.slo.rules):

    trainops_train_step                      the last step the trainer reported
    trainops_train_step_seconds              seconds per step between its last two metrics lines
    trainops_train_tokens_per_second         when the trainer reports it (tokens_per_second, tokens_per_sec)
    trainops_train_loss                      its loss (train_loss, else loss)
    trainops_train_checkpoint_age_seconds    since the last complete checkpoint was pushed (before
                                             the first: since the run started)
    trainops_train_restarts_total            restarts in place so far
    trainops_train_ettr                      ETTR so far (trainops.faults.ettr over the timeline)

The text exposition format (version 0.0.4) is written here rather than through prometheus_client:
seven gauges and a counter from one thread-safe state need none of its registries, and the
supervisor stays free of a dependency (and of its process-global default registry).
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from trainops.checkpoint.metrics import read_metrics

log = logging.getLogger(__name__)
TOKENS_KEYS = ("tokens_per_second", "tokens_per_sec", "tokens_per_s")
LOSS_KEYS = ("train_loss", "loss")
WILDCARDS = ("", "0.0.0.0", "::")
POD_HOST = "0.0.0.0"  # in a pod: every address of the pod's own network, where Prometheus scrapes it


class Exposition(Protocol):
    def render(self) -> str: ...


class NoSeries:
    """An exposition with no series: a pod that trains but reports nothing (a Kueue worker's
    idle sidecar) answers its scrape rather than counting as a target down."""

    def render(self) -> str:
        return ""


def port_of(address: str) -> int:
    """The port of HOST:PORT (train.metricsAddress)."""
    return int(address.rpartition(":")[2])


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class TrainingMetrics:
    """The run's state, fed by the supervisor's threads, rendered on every scrape."""

    def __init__(self, *, pipeline: str, run_id: str, ettr: Callable[[], float | None] | None = None) -> None:
        self.labels = f'pipeline="{_escape(pipeline)}",run="{_escape(run_id)}"'
        self.ettr = ettr
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.step: int | None = None
        self.step_seconds: float | None = None
        self.tokens_per_second: float | None = None
        self.loss: float | None = None
        self.checkpointed: float | None = None  # monotonic time of the last complete checkpoint
        self.restarts = 0
        self._last: tuple[int, float] | None = None  # (step, monotonic) of the last metrics line

    def on_line(self, line: str) -> None:
        """A line of the trainer's output; its JSON metrics lines are read."""
        text = line.strip()
        if not (text.startswith("{") and '"step"' in text):
            return
        try:
            data = json.loads(text)
        except ValueError:
            return
        step = data.get("step") if isinstance(data, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            return
        if data.get("rank", 0) != 0:  # another rank's progress (a Slurm job's other tasks): the run is rank 0's
            return
        tokens = next((float(data[k]) for k in TOKENS_KEYS if _is_number(data.get(k))), None)
        self.progress(step, loss=next((float(data[k]) for k in LOSS_KEYS if _is_number(data.get(k))), None),
                      tokens_per_second=tokens)  # fmt: skip

    def progress(self, step: int, *, loss: float | None = None, tokens_per_second: float | None = None) -> None:
        """The trainer reached `step` now (a metrics line; in a pod's sidecar, a checkpoint)."""
        now = time.monotonic()
        with self._lock:
            if self._last is not None and step > self._last[0]:
                self.step_seconds = (now - self._last[1]) / (step - self._last[0])
            self._last = (step, now)
            self.step = step
            self.tokens_per_second = tokens_per_second if tokens_per_second is not None else self.tokens_per_second
            self.loss = loss if loss is not None else self.loss

    def checkpoint(self, age: float = 0.0) -> None:
        """The last complete checkpoint is `age` seconds old (pushed now: 0)."""
        with self._lock:
            self.checkpointed = time.monotonic() - max(age, 0.0)

    def restarts_at_least(self, count: int) -> None:
        """Restarts counted elsewhere (a Kubernetes job's): the counter never goes back."""
        with self._lock:
            self.restarts = max(self.restarts, count)

    def restarted(self) -> None:
        with self._lock:
            self.restarts += 1
            self._last = None  # a step time spans no restart

    def render(self) -> str:
        ettr = self.ettr() if self.ettr is not None else None
        with self._lock:
            now = time.monotonic()
            age = now - (self.checkpointed if self.checkpointed is not None else self.started)
            rows: list[tuple[str, str, str, float | None]] = [
                ("trainops_train_step", "gauge", "The last step the trainer reported.", self.step),
                ("trainops_train_step_seconds", "gauge", "Seconds per step between the last two metrics lines.",
                 self.step_seconds),
                ("trainops_train_tokens_per_second", "gauge", "Tokens per second the trainer reported.",
                 self.tokens_per_second),
                ("trainops_train_loss", "gauge", "The trainer's loss.", self.loss),
                ("trainops_train_checkpoint_age_seconds", "gauge",
                 "Seconds since the last complete checkpoint was pushed (before the first: since the start).", age),
                ("trainops_train_restarts_total", "counter", "Restarts in place of the trainer.", self.restarts),
                ("trainops_train_ettr", "gauge", "Effective training time ratio so far.", ettr),
            ]  # fmt: skip
        lines: list[str] = []
        for name, kind, text, value in rows:
            if value is None:
                continue
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{{{self.labels}}} {_number(value)}"]
        return "\n".join(lines) + "\n"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MetricsServer:
    """GET /metrics of a TrainingMetrics on host:port, in a thread."""

    def __init__(self, metrics: Exposition, address: str) -> None:
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        served = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path.split("?", 1)[0] == "/metrics"
                body = (served.render() if found else "GET /metrics\n").encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, int(port)), Handler)
        bound = self.server.server_address
        # every address of the host (a Slurm batch host's, a pod's): announced by its name,
        # an address a Prometheus elsewhere can scrape (0.0.0.0 is none)
        shown = socket.gethostname() if host in WILDCARDS else f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound[1]}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def serve_metrics(metrics: Exposition, address: str | None) -> MetricsServer | None:
    """The server, or None (no address; or it cannot listen: said once, the run goes on without it)."""
    if address is None:
        return None
    try:
        server = MetricsServer(metrics, address)
    except OSError as err:
        log.warning("trainops: cannot serve the run's metrics on %s (%s): training goes on without them", address,
                    err.strerror or err)  # fmt: skip
        return None
    log.warning("trainops: the run's Prometheus metrics: %s", server.url)
    return server


def checkpoint_pushed(metrics: TrainingMetrics, directory: Path, *, name: str, step: int) -> None:
    """What a pod's checkpoint sidecar knows of the run (it does not see the trainer's output):
    each checkpoint it pushed is progress — its step, its loss when the checkpoint records one
    (trainer_state.json's metrics, metrics.json) — and the checkpoint age starts over."""

    values = read_metrics(directory / name)
    metrics.progress(step, loss=next((values[k] for k in LOSS_KEYS if k in values), None))
    metrics.checkpoint()
