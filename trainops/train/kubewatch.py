"""The failure loop of a Kubernetes training run, from the user's side of the API server.

On Kubernetes trainops does not sit beside the trainer (the job's own controller restarts
its pods in place: Volcano's policies, a Job's backoffLimit). What it adds is the node:
`watch_run` reads, with the user's kubeconfig, the run's pods and the Nodes they are bound
to, every `interval` seconds, and turns what the cluster says into signals:

- a Node of the run that is gone, or whose Ready condition is not True → node-lost;
- a Node condition that is True and reports trouble (node-problem-detector's), or a Warning
  event about the Node (a GPU health agent's), whose message is evidence — an `NVRM: Xid`
  line, a DCGM failure — → its class (trainops.faults.signals, as on Slurm).

Each signal is diagnosed by the manifest's table (`trainops incidents classes`, with
faults.drainAfter and faultTolerance.maxRetry as on Slurm) and acted on:

- restart: the job's own restart policy restarts it in place; trainops records it;
- requeue: the job restarts away from the node, through git (trainops.train.exclude);
- drain: the node is cordoned and tainted through the API server — THE ONE WRITE TRAINOPS
  MAKES OUTSIDE GIT (trainops.cluster.nodes says why) — then as requeue;
- stop: the run is cancelled through git (trainops.train.cancel).

Each is an incident in the registry beside the run, as on Slurm, closed (recovered) when the
run's pods run again, on other nodes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trainops import clock
from trainops.cluster.access import ClusterAccess
from trainops.cluster.client import connect
from trainops.cluster.nodes import cordon_node, node_events, node_health
from trainops.errors import NotFoundError, TrainopsError, UsageError
from trainops.faults import incidents as records
from trainops.faults.actions import action_for
from trainops.faults.catalog import bucket_for
from trainops.faults.incidents import Incident
from trainops.faults.session import decide
from trainops.faults.signals import MEANINGS, Signal, classify_line, most_specific
from trainops.registry.context import Registries
from trainops.render.names import LABEL_RUN_ID
from trainops.train.cancel import cancel_run
from trainops.train.exclude import restart_excluding
from trainops.train.kube_jobs import job_kinds, run_states
from trainops.train.kubemetrics import RunMetrics

if TYPE_CHECKING:
    from trainops.cluster.client import Cluster
    from trainops.cluster.nodes import Cordon
    from trainops.manifest import Manifest
    from trainops.registry.reference import Reference
    from trainops.train.exclude import RestartResult
    from trainops.train.kube_jobs import RunState


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evidence:
    """A signal read from the API server: its key (so it is acted on once) and when it appeared."""

    key: str
    signal: Signal
    at: datetime


@dataclass(frozen=True)
class WatchReport:
    run_id: str
    checks: int
    phase: str | None  # the run's job phase at the last check
    incidents: list[Incident] = field(default_factory=list)
    cordoned: list[Cordon] = field(default_factory=list)
    restarts: list[RestartResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # evidence not trusted, sources not read


def _when(text: object, default: datetime) -> datetime:
    return clock.parse(str(text)) if text else default


def _event_evidence(node: str, event: dict[str, Any], now: datetime) -> Evidence | None:
    message = " ".join(str(event.get("message") or "").split())
    found = classify_line(message, source="node-health", node=node)
    if found is None:
        return None
    meta = event.get("metadata") or {}
    at = _when(event.get("lastTimestamp") or event.get("eventTime") or meta.get("creationTimestamp"), now)
    return Evidence(f"event/{meta.get('uid')}/{event.get('count') or 1}", found, at)


def node_evidence(cluster: Cluster, node: str, *, now: datetime) -> list[Evidence]:
    """What the API server says is wrong with one node (the module docstring's signals)."""

    health = node_health(cluster, node)
    if not health.exists or not health.ready:
        line = f"node {node}: {health.ready_note}"
        return [Evidence(f"lost/{node}", Signal("node-lost", "cluster", line, node, MEANINGS["node-lost"]), now)]
    out = []
    for problem in health.problems:
        found = classify_line(problem, source="node-health", node=node)
        if found is not None:
            out.append(Evidence(f"condition/{node}/{problem}", found, now))
    for event in node_events(cluster, node):
        evidence = _event_evidence(node, event, now)
        if evidence is not None:
            out.append(evidence)
    return out


class KubeWatch:
    """One run's watch: the nodes it has used since its last restart, the evidence acted on."""

    def __init__(self, manifest: Manifest, cluster: Cluster, registries: Registries, *, run_id: str) -> None:
        self.manifest, self.cluster, self.registries, self.run_id = manifest, cluster, registries, run_id
        self.train = manifest.require_train()
        pipeline = manifest.pipeline.metadata.name
        self.repository: Reference = records.incidents_repository(
            registries, registry=manifest.pipeline.spec.registry, pipeline=pipeline
        )
        self.nodes: set[str] = set()
        self.excluded: set[str] = set()
        self.seen: set[str] = set()
        self.open: list[Incident] = []
        self.stopped = False  # the run was cancelled (a stop): nothing more to watch
        self.stuck_since: float | None = None  # since when the restarted run's pods cannot be scheduled
        self.stuck: Incident | None = None  # its incident, open until a pod runs
        self.report = WatchReport(run_id, 0, None)
        self.metrics = RunMetrics(manifest, registries, run_id=run_id, past=self._past())

    def _past(self) -> list[Incident]:
        """The run's incidents so far (its ETTR's), or none when the registry cannot say: the watch
        starts all the same (said once; recording an incident needs the registry, not watching)."""

        try:
            return records.list_incidents(self.registries, repository=self.repository, run_id=self.run_id)
        except TrainopsError as err:
            log.warning("trainops: could not read run %s's incidents (%s): ETTR counts this watch's only",
                        self.run_id, err)  # fmt: skip
            return []

    def state(self) -> RunState:
        states = run_states(
            self.cluster, train=self.train, pipeline=self.manifest.pipeline.metadata.name, run_id=self.run_id
        )
        return states[-1]

    def check(self, *, prune_timeout: float, interval: float) -> RunState | None:
        """One look: the run's pods and nodes; act on new evidence; close recovered incidents.
        The run's state, or None while its job is away (between the two restart commits)."""

        self.report = _replace(self.report, checks=self.report.checks + 1)
        try:
            state = self.state()
        except NotFoundError:
            return None
        self.report = _replace(self.report, phase=state.phase)
        self._recovered(state)
        self.metrics.look(self.cluster, state)
        self._unschedulable(state)
        self.report = _replace(self.report, warnings=list(self.metrics.warnings))
        self.nodes |= {p.node for p in state.pods if p.node and p.node not in self.excluded}
        since = _when(state.created, clock.now())
        for node in sorted(self.nodes):
            fresh = [
                e
                for e in node_evidence(self.cluster, node, now=clock.now())
                if e.key not in self.seen and e.at >= since
            ]
            self.seen |= {e.key for e in fresh}
            if fresh:
                self._act(node, fresh, state, prune_timeout=prune_timeout, interval=interval)
                break  # one node at a time: the restart changed the run's pods
        return state

    def _act(self, node: str, fresh: list[Evidence], state: RunState, *, prune_timeout: float, interval: float) -> None:
        chosen = most_specific([e.signal for e in fresh])
        assert chosen is not None
        first = min(e.at for e in fresh if e.signal.fault == chosen.fault)
        past = records.list_incidents(self.registries, repository=self.repository)
        action, why = decide(
            action_for(chosen.fault, self.train.faults),
            node=node,
            run_id=self.run_id,
            past=past,
            policy=self.train.faults,
            max_retry=self.train.fault_tolerance.max_retry,
        )
        incident = Incident(
            id=records.next_id(self.registries, repository=self.repository, run_id=self.run_id),
            pipeline=self.manifest.pipeline.metadata.name,
            run_id=self.run_id,
            job_id=f"{state.namespace}/{state.name}",
            fault=chosen.fault,
            detail=chosen.detail or MEANINGS[chosen.fault],
            source=chosen.source,
            evidence=[e.signal.line for e in fresh][:20],
            node=node,
            action=action,
            bucket=bucket_for(chosen.fault, chosen.detail),
            action_note=f"{action}{why}",
            evidence_at=clock.iso(first),
            detected=clock.iso(clock.now()),
            node_flagged=action == "drain" and action_for(chosen.fault, self.train.faults) != "drain",
        )
        records.save(self.registries, repository=self.repository, incident=incident)
        note = self._carry_out(incident, state, prune_timeout=prune_timeout, interval=interval)
        incident = incident.model_copy(update={"action_note": note, "acted": clock.now_utc()})
        records.save(self.registries, repository=self.repository, incident=incident)
        if action in ("requeue", "drain"):  # closed when the run runs again elsewhere
            self.open.append(incident)
            self.metrics.requeued()
        self.metrics.incident(incident)
        self.report = _replace(self.report, incidents=[*self.report.incidents, incident])

    def _carry_out(self, incident: Incident, state: RunState, *, prune_timeout: float, interval: float) -> str:
        """What the action did, in words."""

        node = str(incident.node)
        summary = f"{incident.fault} on {node}: {incident.detail}"
        if incident.action == "restart":
            return f"{incident.action_note}: left to the job's own restart policy ({state.kind})"
        if incident.action == "stop":
            cancelled = cancel_run(self.manifest, run_id=self.run_id)
            self.stopped = True
            return f"{incident.action_note}: run cancelled through git ({str(cancelled.commit)[:12]})"
        done = []
        if incident.action == "drain":
            cordon = cordon_node(self.cluster, node=node, fault=incident.fault, reason=summary)
            self.report = _replace(self.report, cordoned=[*self.report.cordoned, cordon])
            done.append(f"cordoned {node} and tainted it {cordon.taint} (through the API server)")
        restart = self._restart(incident, state, summary, prune_timeout=prune_timeout, interval=interval)
        away = ", ".join(restart.excluded)
        done.append(f"restarted through git away from {away} ({str(restart.restored_commit)[:12]})")
        return f"{incident.action_note}: " + "; ".join(done)

    def _restart(
        self, incident: Incident, state: RunState, summary: str, *, prune_timeout: float, interval: float
    ) -> RestartResult:
        self.excluded.add(str(incident.node))
        self.nodes -= self.excluded
        kinds = job_kinds(self.train)

        def gone() -> bool:
            return _wait(
                lambda: all(self.cluster.get(a, k, state.name, namespace=state.namespace) is None for a, k in kinds),
                timeout=prune_timeout,
                interval=interval,
            )

        restart = restart_excluding(
            self.manifest,
            run_id=self.run_id,
            nodes=sorted(self.excluded),
            reason=summary,
            trailers={"Trainops-Incident": incident.id},
            wait_gone=gone,
        )
        self.report = _replace(self.report, restarts=[*self.report.restarts, restart])
        return restart

    def _unschedulable(self, state: RunState) -> None:
        """After a restart through git, pods of the run the scheduler cannot place for
        STUCK_AFTER seconds are an incident of their own (class unschedulable), closed when
        the run is whole again: none of its pods pending any more."""

        if not self.report.restarts or (self.stuck is None and state.finished):
            return
        pods = self.cluster.list("v1", "Pod", namespace=state.namespace, selector=f"{LABEL_RUN_ID}={self.run_id}")
        if self.stuck is not None:
            started = _whole_since(pods, excluded=self.excluded)
            if started is not None:
                # not before it was seen stuck (startTime has whole seconds)
                recovered = max(started, clock.parse(self.stuck.detected))
                done = self.stuck.model_copy(update={"recovered": clock.iso(recovered)})
                records.save(self.registries, repository=self.repository, incident=done)
                self._replace_incident(done)
                self.stuck, self.stuck_since = None, None
            return
        evidence = [line for p in pods if (line := _unschedulable_line(p)) is not None]
        if not evidence:
            self.stuck_since = None
            return
        self.stuck_since = self.stuck_since if self.stuck_since is not None else time.monotonic()
        if time.monotonic() - self.stuck_since < STUCK_AFTER:
            return
        away = ", ".join(sorted(self.excluded))
        now = clock.iso(clock.now())
        self.stuck = Incident(
            id=records.next_id(self.registries, repository=self.repository, run_id=self.run_id),
            pipeline=self.manifest.pipeline.metadata.name,
            run_id=self.run_id,
            job_id=f"{state.namespace}/{state.name}",
            fault="unschedulable",
            detail=f"{MEANINGS['unschedulable']}: the run was restarted away from {away}",
            source="cluster",
            evidence=evidence[:20],
            action="stop",
            bucket=bucket_for("unschedulable"),
            action_note=f"stop: nothing more is done; the pods wait until a node they may use is free (make {away} "
            f"sound and uncordon it, or free another node)",
            evidence_at=now,
            detected=now,
        )
        records.save(self.registries, repository=self.repository, incident=self.stuck)
        self.metrics.incident(self.stuck)
        self.report = _replace(self.report, incidents=[*self.report.incidents, self.stuck])

    def _replace_incident(self, done: Incident) -> None:
        self.metrics.incident(done)
        self.report = _replace(self.report, incidents=[done if i.id == done.id else i for i in self.report.incidents])

    def _recovered(self, state: RunState) -> None:
        """Open incidents close when a pod of the run runs again, created after the incident,
        on a node not excluded (pods left terminating on a lost node do not count)."""
        if not self.open:
            return

        pods = self.cluster.list("v1", "Pod", namespace=state.namespace, selector=f"{LABEL_RUN_ID}={self.run_id}")
        for incident in self.open:
            started = [
                _when((p.get("status") or {}).get("startTime"), clock.now())
                for p in pods
                if (p.get("status") or {}).get("phase") == "Running"
                and not (p.get("metadata") or {}).get("deletionTimestamp")
                and (p.get("spec") or {}).get("nodeName") not in self.excluded
                and _when((p.get("metadata") or {}).get("creationTimestamp"), clock.now())
                >= clock.parse(incident.detected).replace(microsecond=0)
            ]
            if not started:
                return
            # its pod running is all a watch outside the pod sees of the restart: restarted and recovered
            again = clock.iso(min(started))
            done = incident.model_copy(update={"restarted": again, "recovered": again})
            records.save(self.registries, repository=self.repository, incident=done)
            self.metrics.incident(done)
            self.report = _replace(
                self.report, incidents=[done if i.id == done.id else i for i in self.report.incidents]
            )
        self.open = []


STUCK_AFTER = 10.0  # seconds a restarted run's pods may wait for a node before it is an incident


def _whole_since(pods: list[dict[str, Any]], *, excluded: set[str]) -> datetime | None:
    """When the run's last pod started, once none of them is pending (None while one is, or
    none runs). Pods going away, or left on an excluded node (one lost keeps its pods until
    the pod GC removes them), are not the run's any more; a pod that ran and ended counts."""

    current = [
        p
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("spec") or {}).get("nodeName") not in excluded
    ]
    phases = [(p.get("status") or {}).get("phase") for p in current]
    if "Pending" in phases or not any(phase in ("Running", "Succeeded") for phase in phases):
        return None
    return max(
        _when((p.get("status") or {}).get("startTime"), clock.now())
        for p, phase in zip(current, phases, strict=True)
        if phase in ("Running", "Succeeded")
    )


def _unschedulable_line(pod: dict[str, Any]) -> str | None:
    """The scheduler's word on a pending pod it cannot place (PodScheduled False, Unschedulable)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            message = " ".join(str(condition.get("message") or "").split())
            return f"pod {pod['metadata']['name']}: PodScheduled=False Unschedulable: {message}"
    return None


def _replace(report: WatchReport, **fields: Any) -> WatchReport:
    return dataclasses.replace(report, **fields)


def _wait(done: Callable[[], bool], *, timeout: float, interval: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def watch_run(
    manifest: Manifest,
    *,
    run_id: str,
    access: ClusterAccess | None = None,
    interval: float = 2.0,
    timeout: float | None = None,
    prune_timeout: float = 300.0,
    once: bool = False,
    insecure: bool = False,
    on_nodes: Callable[[RunState, list[str]], None] | None = None,
) -> WatchReport:
    """Watch RUN until its job finishes (or `timeout` seconds, or one look with `once`), with
    the user's kubeconfig; the module docstring says what is read and done. `on_nodes` hears
    the run's state each time the set of nodes watched changes (the first look included)."""

    scheduler = manifest.require_train().scheduler
    if scheduler in ("local", "slurm"):
        raise UsageError(
            f"train.scheduler is {scheduler}: `train watch` watches Kubernetes runs",
            hint="on Slurm and locally `trainops train run` supervises the trainer itself; pick another --env",
        )
    deadline = time.monotonic() + timeout if timeout is not None else None
    with (
        connect(access) as cluster,
        Registries.for_manifest(manifest, insecure=insecure) as registries,
    ):
        watch = KubeWatch(manifest, cluster, registries, run_id=run_id)
        watch.state()  # the run must be on the cluster when the watch starts (NotFoundError)
        watch.metrics.serve()
        try:
            return _loop(watch, interval=interval, deadline=deadline, prune_timeout=prune_timeout, once=once,
                         on_nodes=on_nodes)  # fmt: skip
        finally:
            watch.metrics.close()


def _loop(
    watch: KubeWatch,
    *,
    interval: float,
    deadline: float | None,
    prune_timeout: float,
    once: bool,
    on_nodes: Callable[[RunState, list[str]], None] | None,
) -> WatchReport:
    while True:
        before = set(watch.nodes)
        state = watch.check(prune_timeout=prune_timeout, interval=interval)
        if on_nodes is not None and state is not None and (watch.nodes != before or watch.report.checks == 1):
            on_nodes(state, sorted(watch.nodes))
        if once or watch.stopped or (state is not None and state.finished):
            return watch.report
        if deadline is not None and time.monotonic() > deadline:
            return watch.report
        time.sleep(interval)
