"""What `train watch` serves: the Kubernetes run's training metrics, as the supervisor of `train
run` serves a local or Slurm run's (trainops.slo.exporter: the same series and labels), on
train.metricsAddress, read at each look of the watch:

- the trainer's metrics lines — step, step time, loss, tokens/s — from the log of the run's
  leader pod (its last lines, through the API server; the lines already read are skipped by
  their time). A log the API server cannot fetch is said once; the checkpoints stand in;
- the newest checkpoint of the run in the registry (every CHECKPOINT_EVERY seconds): the
  checkpoint age, and the step and loss when no log line gives them;
- restarts: the job's own (its retries and its containers' restarts) plus one for each
  restart the watch made through git (a new job starts counting from zero);
- ETTR so far from the run's incidents (trainops.faults.ettr.from_incidents).

Inside the cluster the pods' checkpoint sidecar serves the series to the run's PodMonitor
(trainops.slo.render); the watch serves them beside the user, for a Prometheus there.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from trainops import clock
from trainops.errors import TrainopsError
from trainops.faults.ettr import from_incidents
from trainops.render.names import LABEL_ROLE, LABEL_RUN_ID
from trainops.slo.exporter import LOSS_KEYS, MetricsServer, TrainingMetrics, serve_metrics

if TYPE_CHECKING:
    from trainops.cluster.client import Cluster
    from trainops.faults.incidents import Incident
    from trainops.manifest import Manifest
    from trainops.registry.context import Registries
    from trainops.train.kube_jobs import RunState

log = logging.getLogger(__name__)
LOG_TAIL = 200  # lines of the leader's log read at each look
CHECKPOINT_EVERY = 10.0  # seconds between reads of the newest checkpoint


class RunMetrics:
    def __init__(self, manifest: Manifest, registries: Registries, *, run_id: str, past: list[Incident]) -> None:
        self.manifest, self.registries, self.run_id = manifest, registries, run_id
        self.metrics = TrainingMetrics(pipeline=manifest.pipeline.metadata.name, run_id=run_id, ettr=self.ettr)
        self.incidents = {i.id: i for i in past}
        self.started: str | None = None
        self.base = 0  # restarts of the run's jobs before the current one
        self.job_restarts = 0
        self.last_log: str | None = None  # the time of the last log line read
        self.lines = False  # the log gave metrics lines (the checkpoints give only the age then)
        self.unreadable: set[str] = set()  # pods whose log could not be read (said once each)
        self.checked: float | None = None
        self.checkpoint_step: int | None = None
        self.warnings: list[str] = []
        self.server: MetricsServer | None = None

    def serve(self) -> None:
        self.server = serve_metrics(self.metrics, self.manifest.require_train().metrics_address)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def ettr(self) -> float | None:
        if self.started is None:
            return None
        return from_incidents(list(self.incidents.values()), started=self.started, now=clock.iso(clock.now()))

    def incident(self, incident: Incident) -> None:
        self.incidents[incident.id] = incident

    def requeued(self) -> None:
        """The watch restarted the run through git: its next job counts from zero."""
        self.base += self.job_restarts + 1
        self.job_restarts = 0
        self.metrics.restarts_at_least(self.base)

    def look(self, cluster: Cluster, state: RunState) -> None:
        self.started = self.started or state.created
        self.job_restarts = state.restarts
        self.metrics.restarts_at_least(self.base + state.restarts)
        self._log(cluster, state)
        now = time.monotonic()
        if self.checked is None or now - self.checked >= CHECKPOINT_EVERY:
            self.checked = now
            self._checkpoint()

    def _log(self, cluster: Cluster, state: RunState) -> None:
        pod = _leader(cluster, state)
        if pod is None:
            return
        name = pod["metadata"]["name"]
        container = (pod.get("spec") or {}).get("containers", [{}])[0].get("name")
        try:
            text = cluster.logs(namespace=state.namespace, pod=name, container=container, tail=LOG_TAIL,
                                timestamps=True)  # fmt: skip
        except TrainopsError as err:
            if name not in self.unreadable:
                self.unreadable.add(name)
                self._warn(f"cannot read the log of pod {name} ({err}): the run's metrics come from its checkpoints")
            return
        for line in text.splitlines():
            at, _, rest = line.partition(" ")
            if self.last_log is not None and at <= self.last_log:
                continue
            self.last_log = at
            before = self.metrics.step
            self.metrics.on_line(rest)
            self.lines = self.lines or self.metrics.step != before

    def _checkpoint(self) -> None:
        # lazy: loads concurrent.futures
        from trainops.checkpoint.catalog import checkpoint_repository, latest_checkpoint

        try:
            info = latest_checkpoint(
                self.registries, repository=checkpoint_repository(self.registries, manifest=self.manifest)
            )
        except Exception as err:  # the registry is the checkpoint age's only source: said, the watch goes on
            self._warn(f"cannot read the run's newest checkpoint: {err}")
            return
        if info is None or info.run_id != self.run_id or info.step is None or info.created is None:
            return
        if info.step != self.checkpoint_step:
            self.checkpoint_step = info.step
            age = (clock.now() - clock.parse(info.created)).total_seconds()
            self.metrics.checkpoint(age=age)
            if not self.lines:
                loss = next((info.metrics[k] for k in LOSS_KEYS if k in info.metrics), None)
                self.metrics.progress(info.step, loss=loss)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("trainops: %s", message)


def _leader(cluster: Cluster, state: RunState) -> dict[str, Any] | None:
    """The pod whose log has the run's metrics lines: the leader's (role leader), else the first
    by name (an indexed job's index 0), of those running."""

    pods = [
        p
        for p in cluster.list("v1", "Pod", namespace=state.namespace, selector=f"{LABEL_RUN_ID}={state.run_id}")
        if (p.get("status") or {}).get("phase") == "Running" and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    pods.sort(key=lambda p: ((p["metadata"].get("labels") or {}).get(LABEL_ROLE) != "leader", p["metadata"]["name"]))
    return pods[0] if pods else None
