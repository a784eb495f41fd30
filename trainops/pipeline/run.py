"""`trainops run`: the manifest's stages as one flow, each skipped when its output for its
key is already in the registry.

For each stage in order: its key is computed from its configuration and the digests of its
inputs (trainops.pipeline.keys); a record for that key in the registry (trainops.pipeline.
cache) means it is done and its outputs are reused; otherwise the executor runs it and the
record is written after its outputs. A failed stage stops the run; the next run finds the
stages before it cached and starts again at it. Stages before `--from` are never run: their
outputs must be in the cache, which is checked before anything runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from trainops.cluster.access import ClusterAccess
from trainops.errors import InputError, NotFoundError, TrainopsError, UsageError
from trainops.manifest import Manifest
from trainops.pipeline import cache
from trainops.pipeline.executors import EXECUTORS, skip_check, stage_functions
from trainops.pipeline.executors.base import StageContext
from trainops.pipeline.executors.flow import missing_provider, rollout_held
from trainops.pipeline.executors.local import checkpoint_selection
from trainops.pipeline.graph import Node, build_graph, select
from trainops.pipeline.keys import SourceDigest, section, source_digest, stage_key
from trainops.pipeline.stage import Event, EventSink, Outcome, StageResult, no_events
from trainops.registry.artifact import canonical_json
from trainops.registry.backends.base import sha256_digest
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference


@dataclass
class RunResult:
    pipeline: str
    env: str | None
    executor: str
    dry_run: bool
    source: str
    stages: list[StageResult] = field(default_factory=list)
    error: TrainopsError | None = None
    seconds: float = 0.0

    data_properties: ClassVar[tuple[str, ...]] = ("failed", "exit_code")

    @property
    def exit_code(self) -> int:
        return self.error.exit_code if self.error else 0

    @property
    def failed(self) -> str | None:
        return next((s.name for s in self.stages if s.status == "failed"), None)


@dataclass(frozen=True)
class RunOptions:
    start: str | None = None
    stop: str | None = None
    dry_run: bool = False
    executor: str | None = None
    insecure: bool = False
    timeout: float = 24 * 3600.0
    quiet: float = 300.0
    command_stdout: IO[Any] | None = None
    serve_image: str | None = None
    cluster: ClusterAccess | None = None  # cluster executor: read the job's status from the API server
    # A stage before `start` whose output is missing runs (as `dvc repro`) instead of
    # refusing with a --from error: what `trainops ci` wants, which picks `start` itself.
    run_missing_upstream: bool = False
    # --force --reason: the rollout stage rolls out a release the GitOps history shows
    # rolled back or aborted (else it is skipped, saying so).
    force_reason: str | None = None
    # --fresh: a local training starts from step 0 (nothing restored; its step-N tags
    # replace an older run's), for code whose checkpoints must not resume old ones.
    fresh: bool = False


def default_executor(manifest: Manifest) -> str:
    train = manifest.pipeline.spec.train
    return "local" if train is None or train.scheduler == "local" else "cluster"


def stage_config(manifest: Manifest, stage: str) -> Any:
    """The resolved configuration a stage's key covers (after the environment overlay)."""

    spec = manifest.pipeline.spec
    train = spec.train
    if stage == "image":
        return {"image": section(spec.image), "trainImage": train.image if train else None}
    if stage == "train":
        return section(train)
    if stage == "checkpoint":
        keep = section(train.checkpoint.keep) if train else None
        return {"select": checkpoint_selection(manifest), "keep": keep}
    if stage == "eval":
        return section(spec.eval)
    if stage == "release":
        return section(spec.release)
    return {"rollout": section(spec.rollout), "gitops": section(spec.gitops)}


def stage_inputs(stage: str, node: Node, results: dict[str, StageResult], source: SourceDigest) -> dict[str, str]:
    inputs = {"source": source.digest} if stage in ("image", "train") else {}
    for need in node.needs:
        for out in results[need].outputs:
            inputs[f"{need}.{out.name}"] = out.digest
    return inputs


def run_pipeline(*, manifest: Manifest, options: RunOptions, on_event: EventSink = no_events) -> RunResult:
    """Run (or with dry_run, plan) the stages of the window; see the module docstring."""
    started = time.monotonic()
    nodes = build_graph(manifest=manifest)
    window = select(nodes, start=options.start, stop=options.stop)
    executor = options.executor or default_executor(manifest)
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}", hint=f"use {' or '.join(EXECUTORS)}")
    if options.fresh and executor != "local":
        raise UsageError(
            "--fresh starts a training here from step 0; a cluster job resumes as train.checkpoint.resume says",
            hint="set train.checkpoint.resume: none (and a checkpoint repository of its own), or run --executor local",
        )
    if not options.dry_run:
        _check_providers(window)
    source = source_digest(manifest=manifest)
    result = RunResult(
        pipeline=manifest.pipeline.metadata.name,
        env=manifest.env,
        executor=executor,
        dry_run=options.dry_run,
        source=source.digest,
    )
    with Registries.for_manifest(manifest, insecure=options.insecure) as registries:
        check_references(manifest, registries, window)
        flow = _Flow(manifest, registries, options, executor, source, on_event)
        last = [n.name for n in nodes].index(window[-1])
        try:
            for node in nodes[: last + 1]:
                flow.hold = node.name not in window  # the stages before --from report once all are found
                stage = flow.stage(node, before_window=flow.hold)
                result.stages.append(stage)
                if stage.status == "failed":
                    result.error = flow.error
                    break
        finally:
            result.seconds = time.monotonic() - started
    return result


def _check_providers(window: list[str]) -> None:
    for stage in window:
        module = missing_provider(stage)
        if module is not None:
            raise InputError(
                f"stage {stage} needs {module}, which this trainops does not have yet",
                hint=f"run the stages before it: --to {window[max(0, window.index(stage) - 1)]}",
            )


def named_inputs(manifest: Manifest, window: list[str]) -> list[tuple[str, str, str]]:
    """(stage, field, reference) of every input the manifest names outright for the window."""

    spec = manifest.pipeline.spec
    found = []
    if "image" in window and spec.train is not None and spec.train.image:
        found.append(("image", "train.image", spec.train.image))
    choice = checkpoint_selection(manifest)
    if "checkpoint" in window and choice not in ("latest", "best"):
        named = "eval.checkpoint" if spec.eval is not None else "release.source"
        found.append(("checkpoint", named, choice))
    if "rollout" in window and spec.release is None and spec.rollout is not None and spec.rollout.model:
        found.append(("rollout", "rollout.model", spec.rollout.model))
    return found


def check_references(manifest: Manifest, registries: Registries, window: list[str]) -> None:
    """Every reference the manifest names as a stage input exists, before anything runs."""
    from trainops.image.api import base_reference  # lazy: loads tarfile, sqlite3
    from trainops.registry.store import resolve  # lazy: loads sqlite3

    for stage, name, text in named_inputs(manifest, window):
        try:
            resolve(registries, ref=base_reference(text, registries))
        except NotFoundError:
            raise NotFoundError(
                f"stage {stage} needs {name} {text}, which is not in its registry",
                hint=f"push it, or fix {name} in {manifest.path.name}",
            ) from None


class _Flow:
    """One run's state: the results so far, and how to compute, find, run and record a stage."""

    def __init__(
        self,
        manifest: Manifest,
        registries: Registries,
        options: RunOptions,
        executor: str,
        source: SourceDigest,
        on_event: EventSink,
    ) -> None:
        self.manifest, self.registries, self.options = manifest, registries, options
        self.executor, self.source, self.emit = executor, source, on_event
        self.repository: Reference = cache.records_repository(manifest, registries)
        self.results: dict[str, StageResult] = {}
        self.error: TrainopsError | None = None
        self.hold = False
        self.held: list[Event] = []

    def stage(self, node: Node, *, before_window: bool) -> StageResult:
        name = node.name
        pending = [n for n in node.needs if self.results[n].status in ("runs", "failed", "not-run")]
        if pending:
            why = f"after {', '.join(pending)} (its inputs are not known yet)"
            module = missing_provider(name)
            if module is not None:
                why = f"cannot run here: it needs {module}, which this trainops does not have"
            res = StageResult(name, "runs", why=why)
            return self._done(res, "plan", res.why)
        config = stage_config(self.manifest, name)
        inputs = {
            "config": sha256_digest(canonical_json(config)),
            **stage_inputs(name, node, self.results, self.source),
        }
        key = stage_key(stage=name, config=config, inputs=inputs)
        ctx = self._context(name, key)
        skipped = skip_check(self.executor)(ctx) if name == "image" else None
        if skipped is not None:
            res = self._from_outcome(name, key, "skipped", skipped, str(skipped.skipped))
            return self._done(res, "skipped", res.why)
        record = cache.lookup(self.registries, repository=self.repository, stage=name, key=key)
        if record is not None:
            main = (record.outputs[0].ref or record.outputs[0].digest) if record.outputs else record.ref
            res = StageResult(name, "cached", key=key, why=f"cached ({main})", outputs=record.outputs)
            return self._done(res, "cached", main)  # said as `[train] cached: REF`, the word once
        why = cache.explain(self.registries, repository=self.repository, stage=name, inputs=inputs)
        if before_window and self.options.run_missing_upstream:
            why = f"no output for its inputs before {self.options.start}, which needs it ({why})"
            self.hold = False  # it runs: what was held so far is said first
        elif before_window:
            raise InputError(
                f"--from {self.options.start}: stage {name} has no output in the registry for its current inputs "
                f"({why})",
                hint=f"run from {name} (trainops run --from {name}), or without --from",
            )
        if self.options.dry_run:
            module = missing_provider(name)
            if module is not None:
                why = f"cannot run here: it needs {module}, which this trainops does not have"
            held = rollout_held(ctx) if name == "rollout" else None
            if held is not None:  # a release the GitOps history shows taken off
                return self._done(StageResult(name, "skipped", key=key, why=held), "skipped", held)
            return self._done(StageResult(name, "runs", key=key, why=why), "plan", f"runs ({why})")
        return self._run(ctx, inputs, why)

    def _context(self, name: str, key: str) -> StageContext:
        return StageContext(
            manifest=self.manifest,
            registries=self.registries,
            stage=name,
            key=key,
            source=self.source,
            inputs=self.results,
            note=lambda text: self.emit(Event(name, "note", text)),
            insecure=self.options.insecure,
            timeout=self.options.timeout,
            quiet=self.options.quiet,
            poll=max(0.2, min(5.0, self.options.quiet / 5)),
            command_stdout=self.options.command_stdout,
            serve_image=self.options.serve_image,
            force_reason=self.options.force_reason,
            fresh=self.options.fresh,
            cluster=self.options.cluster,
        )

    def _run(self, ctx: StageContext, inputs: dict[str, str], why: str) -> StageResult:
        name = ctx.stage
        self.emit(Event(name, "start", f"runs ({why})"))
        began = time.monotonic()
        try:
            outcome = stage_functions(self.executor)[name](ctx)
            outcome.outputs = [cache.portable(self.registries, o) for o in outcome.outputs]
            status = "skipped" if outcome.skipped else "ran"
            res = self._from_outcome(name, ctx.key, status, outcome, outcome.skipped or why)
            if outcome.cacheable and not outcome.skipped:
                lineage = self._lineage()
                cache.save(
                    self.registries,
                    repository=self.repository,
                    stage=name,
                    key=ctx.key,
                    outputs=outcome.outputs,
                    inputs=inputs,
                    lineage=lineage,
                )
        except TrainopsError as err:
            self.error = err
            res = StageResult(name, "failed", key=ctx.key, why=why, error=str(err))
            res.seconds = time.monotonic() - began
            return self._done(res, "failed", str(err))
        res.seconds = time.monotonic() - began
        shown = ", ".join(o.ref or o.digest for o in res.outputs)
        return self._done(res, "skipped" if status == "skipped" else "done", shown or res.why)

    def _from_outcome(self, name: str, key: str, status: Any, outcome: Outcome, why: str) -> StageResult:
        return StageResult(
            name, status, key=key, why=why, outputs=outcome.outputs, notes=outcome.notes, details=outcome.details
        )

    def _lineage(self) -> Lineage:
        from trainops.gitinfo import git_state  # lazy: loads subprocess

        git = git_state(self.manifest.root)
        return Lineage(
            pipeline=self.manifest.pipeline.metadata.name,
            git_commit=git.commit if git else None,
            git_repo=git.remote if git else None,
        )

    def _done(self, res: StageResult, kind: Any, message: str) -> StageResult:
        self.results[res.name] = res
        self.held.append(Event(res.name, kind, message))
        if not self.hold:
            for event in self.held:
                self.emit(event)
            self.held.clear()
        return res
