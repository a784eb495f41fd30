"""One interface every training target implements — render, submit, status, logs, cancel,
watch — and `target_for`, the one place that chooses the target.

- `LocalTarget`: `train run --local` runs, read from what their supervisor kept here
  (output) and recorded in the registry (timeline, incidents: ETTR).
- `SlurmTarget`: the Slurm job a run became (its record beside the manifest; sbatch,
  scontrol, scancel here or on the login host).
- `KubernetesTarget`: Volcano, Kueue (Job, JobSet), Kubeflow TrainJob and PyTorchJob, KubeRay RayJob alike: the job
  the GitOps controller applied, read from the API server through one reader
  (trainops.train.kube_jobs knows each kind's status and pods); cancel and the watch's
  requeue are GitOps commits.

Render and submit are the same for every target (trainops.train.submit: the scheduler's
job, and on Slurm its sbatch, behind one GitOps commit; a local scheduler has nothing to
render and says so). Status, logs and cancel return each target's own result (their JSON
shapes are the commands' output); logs come as `LogPart`s, one per stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from trainops.errors import NotFoundError, UsageError
from trainops.faults.timeline import kept_output, run_log_path
from trainops.manifest import Manifest
from trainops.slurm.record import submitted_here
from trainops.train.cancel import cancel_run

if TYPE_CHECKING:
    from trainops.cluster.access import ClusterAccess
    from trainops.faults.query import LocalRunStatus
    from trainops.train.cancel import CancelResult
    from trainops.train.kube_jobs import RunState
    from trainops.train.kubewatch import WatchReport
    from trainops.train.slurm_jobs import JobStatus
    from trainops.train.submit import RenderedText, RenderTreeResult, SubmitResult


@dataclass(frozen=True)
class LogPart:
    """One stream of a run's output: a pod's container, a Slurm job's file, a local run's kept output."""

    text: str | None
    source: str | None = None  # what it came from, when a run has several streams (pod and container)
    missing: str | None = None  # what to say while it has no text


@dataclass(frozen=True)
class WatchOptions:
    """How `train watch` looks: seconds between looks, when to stop, how long a restart waits
    for the GitOps controller to prune the job."""

    interval: float = 2.0
    timeout: float | None = None
    prune_timeout: float = 300.0
    once: bool = False
    insecure: bool = False


OnNodes = Callable[["RunState", list[str]], None]


class Target(Protocol):
    """What every training target does with a run of the manifest's pipeline."""

    name: ClassVar[str]  # local, slurm, kubernetes
    nothing: ClassVar[str]  # what `status` without RUN found when it found no run

    def render(
        self, *, run_id: str, image: str | None, insecure: bool, out: Path | None
    ) -> RenderedText | RenderTreeResult: ...
    def submit(self, *, run_id: str, image: str | None, insecure: bool) -> SubmitResult: ...
    def status(self, run_id: str | None) -> list[JobStatus] | list[RunState] | list[LocalRunStatus]: ...
    def logs(self, run_id: str) -> list[LogPart]: ...
    def cancel(self, run_id: str) -> CancelResult | JobStatus: ...
    def watch(self, run_id: str, options: WatchOptions, on_nodes: OnNodes | None = None) -> WatchReport: ...


class _Rendered:
    """Render and submit, the same for every target (trainops.train.submit)."""

    name: ClassVar[str]

    def __init__(self, manifest: Manifest, access: ClusterAccess | None = None) -> None:
        self.manifest = manifest
        self.access = access

    def render(
        self, *, run_id: str, image: str | None, insecure: bool, out: Path | None
    ) -> RenderedText | RenderTreeResult:
        from trainops.train.submit import render_text, render_tree  # lazy: loads subprocess

        if out is None:
            return render_text(self.manifest, run_id=run_id, image=image, insecure=insecure)
        return render_tree(self.manifest, out=out, run_id=run_id, image=image, insecure=insecure)

    def submit(self, *, run_id: str, image: str | None, insecure: bool) -> SubmitResult:
        from trainops.train.submit import submit  # lazy: loads subprocess

        return submit(self.manifest, run_id=run_id, image=image, insecure=insecure, access=self.access)

    def watch(self, run_id: str, options: WatchOptions, on_nodes: OnNodes | None = None) -> WatchReport:
        scheduler = self.manifest.require_train().scheduler
        what = f"train.scheduler is {scheduler}" if scheduler == self.name else f"run {run_id} is a {self.name} run"
        raise UsageError(
            f"{what}: `train watch` watches Kubernetes runs",
            hint="on Slurm and locally `trainops train run` supervises the trainer itself; pick another --env",
        )


class LocalTarget(_Rendered):
    name: ClassVar[str] = "local"
    nothing: ClassVar[str] = "no local runs recorded (`trainops train run --local` records each)"

    def status(self, run_id: str | None) -> list[LocalRunStatus]:
        from trainops.faults.query import local_runs, local_status  # lazy: loads statistics

        if run_id is None:
            return list(local_runs(self.manifest))
        return [local_status(self.manifest, run_id=run_id)]

    def output_path(self, run_id: str) -> Path:
        """Where the supervisor of a local run keeps its output (both streams of every start)."""

        return run_log_path(self.manifest, run_id)

    def logs(self, run_id: str) -> list[LogPart]:
        kept = kept_output(self.manifest, run_id)
        if kept is None:
            raise NotFoundError(
                f"the output of local run {run_id} is not kept here ({self.output_path(run_id)})",
                hint="a run's output stays on the machine that ran it; `trainops train status RUN` reads its ETTR",
            )
        return [LogPart(kept)]

    def cancel(self, run_id: str) -> CancelResult | JobStatus:
        raise UsageError(
            f"run {run_id} runs locally: it is stopped where it runs, not through a scheduler",
            hint="press Ctrl-C where `train run --local` runs (or send it SIGTERM): the trainer saves first",
        )


class SlurmTarget(_Rendered):
    name: ClassVar[str] = "slurm"
    nothing: ClassVar[str] = "no runs submitted from here (trainops train submit)"

    def status(self, run_id: str | None) -> list[JobStatus]:
        from trainops.train.slurm_jobs import job_status  # lazy: loads subprocess

        return list(job_status(self.manifest, run_id=run_id))

    def logs(self, run_id: str) -> list[LogPart]:
        from trainops.train.slurm_jobs import job_logs  # lazy: loads subprocess

        log = job_logs(self.manifest, run_id=run_id)
        return [
            LogPart(log.text, missing=f"job {log.job_id} has written no output yet ({log.path or 'no output file'})")
        ]

    def cancel(self, run_id: str) -> JobStatus:
        from trainops.train.slurm_jobs import cancel_job  # lazy: loads subprocess

        return cancel_job(self.manifest, run_id=run_id)


class KubernetesTarget(_Rendered):
    name: ClassVar[str] = "kubernetes"
    nothing: ClassVar[str] = "no runs of this pipeline in the cluster"

    def status(self, run_id: str | None) -> list[RunState]:
        from trainops.train.kube_jobs import manifest_runs  # lazy: loads ssl, socketserver

        return list(manifest_runs(self.manifest, run_id=run_id, access=self.access))

    def logs(self, run_id: str) -> list[LogPart]:
        from trainops.train.kube_jobs import manifest_logs  # lazy: loads ssl, socketserver

        return [
            LogPart(item.text or None, source=f"pod {item.pod} ({item.container})", missing="(no log lines)")
            for item in manifest_logs(self.manifest, run_id=run_id, access=self.access)
        ]

    def cancel(self, run_id: str) -> CancelResult:
        return cancel_run(self.manifest, run_id=run_id)

    def watch(self, run_id: str, options: WatchOptions, on_nodes: OnNodes | None = None) -> WatchReport:
        from trainops.train.kubewatch import watch_run  # lazy: loads ssl, socketserver

        return watch_run(
            self.manifest,
            run_id=run_id,
            access=self.access,
            interval=options.interval,
            timeout=options.timeout,
            prune_timeout=options.prune_timeout,
            once=options.once,
            insecure=options.insecure,
            on_nodes=on_nodes,
        )


def manifest_target(manifest: Manifest, access: ClusterAccess | None = None) -> Target:
    """The target the manifest's train.scheduler names (what render and submit work for)."""
    scheduler = manifest.require_train().scheduler
    if scheduler == "slurm":
        return SlurmTarget(manifest)
    return LocalTarget(manifest) if scheduler == "local" else KubernetesTarget(manifest, access)


def target_for(
    manifest: Manifest, *, run_id: str | None = None, access: ClusterAccess | None = None, records: bool = False
) -> Target:
    """The target of RUN (or, without RUN, of the pipeline's runs), chosen once:

    1. a run submitted to Slurm from here (its run record) is Slurm's;
    2. a run that ran here (`train run --local`: its output kept here) is local, whatever
       scheduler the manifest names; with `records` (a command that reads the registry
       anyway: status), also one whose timeline the registry keeps with no Slurm job;
    3. else the manifest's train.scheduler: slurm, local, or a Kubernetes one (Volcano,
       Kueue, Kubeflow TrainJob or PyTorchJob);
    4. without RUN or a cluster named (--kubeconfig, --context), runs submitted to Slurm from
       here make it Slurm's.
    """

    scheduler = manifest.require_train().scheduler
    if run_id is not None and submitted_here(manifest, run_id=run_id):
        return SlurmTarget(manifest)
    if run_id is not None and scheduler != "local" and _ran_here(manifest, run_id, records=records):
        return LocalTarget(manifest)
    if scheduler in ("slurm", "local"):
        return manifest_target(manifest)
    if run_id is None and access is None and submitted_here(manifest, run_id=None):
        return SlurmTarget(manifest)
    return KubernetesTarget(manifest, access)


def _ran_here(manifest: Manifest, run_id: str, *, records: bool) -> bool:
    """RUN is a `train run --local` run: its output is kept here (or, with `records`, the
    registry keeps its timeline, which names no Slurm job)."""
    from trainops.faults.query import is_local_run  # lazy: loads statistics

    return run_log_path(manifest, run_id).is_file() or (records and is_local_run(manifest, run_id=run_id))
