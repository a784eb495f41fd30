"""`trainops eval run`: evaluate a checkpoint, check its gates, push the report.

1. the checkpoint (eval.checkpoint, or the one named) is resolved to a digest and pulled,
   every file verified, into a scratch directory;
2. eval.command runs there as a subprocess in its own process group with the contract
   TRAINOPS_EVAL_CHECKPOINT (the checkpoint's directory), TRAINOPS_EVAL_OUTPUT (where it
   writes one JSON object of numbers), TRAINOPS_CHECKPOINT_REF (ref@sha256:…) and eval.env;
   eval.timeout kills the group;
3. the metrics are checked against eval.gates and the report is pushed as a referrer of the
   checkpoint — whether the gates passed or not.

A crash, a timeout or output that is not a JSON object of numbers raises CommandFailedError
(exit 9) before anything is pushed: no report ever claims a verdict it does not have.
`run_eval` returns the result even when a gate failed (the whole-flow command needs it);
`require_passed(result)` then raises GateFailedError (exit 8).
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from trainops import clock
from trainops.errors import CommandFailedError, InputError
from trainops.eval import gates as gate_checks
from trainops.eval.gates import GateResult, check_gates, read_metrics
from trainops.eval.report import EvalReport, ReportGate, push_report
from trainops.eval.select import resolve_checkpoint
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.stages import EvalSpec
from trainops.registry.artifact import scan_tree
from trainops.registry.chunks.index import files_of
from trainops.registry.context import ProgressSink, Registries
from trainops.registry.digestcache import DigestCache
from trainops.registry.lineage_data import Lineage, Parent
from trainops.registry.pulling import pull
from trainops.registry.reference import Reference
from trainops.registry.store import Resolved
from trainops.render.image import pinned_digest
from trainops.supervise import run_command

log = logging.getLogger(__name__)

ENV_CHECKPOINT = "TRAINOPS_EVAL_CHECKPOINT"
ENV_OUTPUT = "TRAINOPS_EVAL_OUTPUT"
ENV_REF = "TRAINOPS_CHECKPOINT_REF"


@dataclass(frozen=True)
class EvalResult:
    checkpoint: str  # ref@sha256:…
    metrics: dict[str, float]
    gates: list[GateResult]
    passed: bool
    report: Reference  # the pushed report, pinned
    started: str
    ended: str
    command: list[str] = field(default_factory=list)


def eval_spec(manifest: Manifest) -> EvalSpec:
    spec = manifest.pipeline.spec.eval
    if spec is None:
        raise InputError(f"{manifest.path} has no eval section", hint="add spec.eval (command, gates)")
    return spec


def run_eval(
    *,
    manifest: Manifest,
    checkpoint: str | None,
    registries: Registries,
    image: str | None = None,
    workdir: Path | None = None,
    local_copy: Path | None = None,
    base_env: Mapping[str, str] | None = None,
    command_stdout: int | IO[Any] | None = None,
    progress: ProgressSink | None = None,
) -> EvalResult:
    """Evaluate `checkpoint` (default eval.checkpoint) and push the report; see the module doc.

    `image` names the image the eval runs in (ref@sha256:…, recorded in the report; in a
    pod, TRAINOPS_IMAGE); eval.command runs in `workdir` (default: the manifest's
    directory). `local_copy`, a directory holding exactly the checkpoint's files, is used
    instead of pulling when every file's digest matches. Returns the result whether or not
    the gates passed.
    """
    spec = eval_spec(manifest)
    found = resolve_checkpoint(registries, manifest=manifest, which=checkpoint or spec.checkpoint)
    pinned = str(found.ref)
    started = clock.iso()
    with tempfile.TemporaryDirectory(prefix="trainops-eval-") as scratch:
        directory = local_copy.absolute() if local_copy and same_files(found, local_copy) else None
        if directory is None:
            directory = Path(scratch) / "checkpoint"
            pull(registries, ref=found.ref, dest=directory, progress=progress)
        output = Path(scratch) / "metrics.json"
        env = dict(os.environ if base_env is None else base_env)
        env.update(spec.env)
        env.update({ENV_CHECKPOINT: str(directory), ENV_OUTPUT: str(output), ENV_REF: pinned})
        _run_command(spec, cwd=(workdir or manifest.root).absolute(), env=env, stdout=command_stdout)
        metrics = read_metrics(output)
    ended = clock.iso()
    results = check_gates(spec.gates, metrics)
    passed = all(r.passed for r in results)
    image = image or (base_env or os.environ).get("TRAINOPS_IMAGE") or None
    report = EvalReport(
        pipeline=manifest.pipeline.metadata.name,
        environment=manifest.env,
        checkpoint=pinned,
        command=list(spec.command),
        image=image,
        datasets=_datasets(manifest, found),
        metrics=metrics,
        gates=[ReportGate(**asdict(r)) for r in results],
        passed=passed,
        started=started,
        ended=ended,
    )
    pushed = push_report(registries, checkpoint=found, report=report, lineage=_lineage(manifest, found, metrics, image))
    return EvalResult(pinned, metrics, results, passed, pushed, started, ended, list(spec.command))


def same_files(found: Resolved, directory: Path) -> bool:
    """Whether directory holds exactly the files of the artifact, each with its digest."""

    wanted = {view.path: view.digest for view in files_of(found.parsed, str(found.ref))}
    try:
        entries = scan_tree(directory)
    except InputError:
        return False
    if {e.relpath for e in entries} != set(wanted):
        log.warning("%s does not hold the files of %s: pulling it", directory, found.ref)
        return False
    cache = DigestCache()
    changed = [e.relpath for e in entries if cache.digest(e.path)[0] != wanted[e.relpath]]
    if changed:
        log.warning("%s differs from %s in %s: pulling it", directory, found.ref, ", ".join(changed[:3]))
    return not changed


def require_passed(result: EvalResult) -> None:
    """GateFailedError (exit 8) naming the failing gates, unless every gate passed."""
    gate_checks.require_passed(result.gates, what=f"eval of {result.checkpoint}")


def _run_command(spec: EvalSpec, *, cwd: Path, env: dict[str, str], stdout: int | IO[Any] | None) -> None:
    timeout = duration_seconds(spec.timeout) if spec.timeout else None
    started = time.monotonic()
    try:
        code = run_command(
            list(spec.command),
            cwd=cwd,
            env=env,
            interval=0.5,
            tick=lambda: None,
            stdout=stdout,
            timeout=timeout,
            group=True,
            what="eval.command",
        ).code
    except subprocess.TimeoutExpired:
        raise CommandFailedError(
            f"eval.command timed out after {spec.timeout} (eval.timeout); its process group was killed",
            hint="raise eval.timeout or make the evaluation faster; no report was pushed",
        ) from None
    if code:
        raise CommandFailedError(
            f"eval.command exited {code} after {time.monotonic() - started:.1f}s",
            status=code,
            hint="its output above says why; no report was pushed",
        )


def _datasets(manifest: Manifest, found: Resolved) -> list[str]:
    train = manifest.pipeline.spec.train
    named = [d.ref for d in train.datasets] if train is not None else []
    recorded = [f"{p.ref}@{p.digest}" for p in found.parsed.lineage().parents if p.relation == "dataset"]
    return sorted(set(named + recorded))


def _lineage(manifest: Manifest, found: Resolved, metrics: dict[str, float], image: str | None) -> Lineage:
    source = found.parsed.lineage()
    digest = (pinned_digest(image) if image else None) or source.image_digest
    shown = str(found.ref.with_digest(None))
    return Lineage(
        pipeline=manifest.pipeline.metadata.name,
        git_commit=source.git_commit,
        git_repo=source.git_repo,
        image_digest=digest,
        run_id=source.run_id,
        step=source.step,
        metrics=metrics,
        parents=[Parent(digest=found.manifest.digest, ref=shown, relation="evaluated")],
    )
