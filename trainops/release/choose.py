"""Which checkpoint a release takes, and the eval that lets it: `release.source` is `best`
(by train.checkpoint.keep.metric as the checkpoint recorded it, else as its eval measured
it) or `latest` among the checkpoints with a passing eval, or a
reference. An eval passes when its verdict passed and its metrics still meet today's
eval.gates (a tightened gate is not satisfied by an old report)."""

from __future__ import annotations

from dataclasses import dataclass

from trainops.checkpoint.catalog import CheckpointInfo, checkpoint_repository, list_checkpoints, ranked
from trainops.errors import GateFailedError, NotFoundError
from trainops.eval.gates import GateResult, check_gates, failing
from trainops.eval.report import EvalEntry, list_evals
from trainops.eval.select import WORDS, ranking, resolve_checkpoint
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.store import Resolved, resolve


@dataclass(frozen=True)
class Candidate:
    checkpoint: Resolved
    passing: EvalEntry | None  # the newest eval that passes today's gates
    latest: EvalEntry | None  # the newest eval of any verdict
    failed: list[GateResult]  # today's gates the newest eval fails

    def why_not(self) -> str:
        if self.latest is None:
            return "never evaluated"
        if self.failed:
            return "; ".join(g.describe() for g in self.failed)
        return "its eval failed"


def candidate(registries: Registries, *, manifest: Manifest, checkpoint: Resolved) -> Candidate:
    gates = manifest.pipeline.spec.eval.gates if manifest.pipeline.spec.eval is not None else []
    evals = list_evals(registries, checkpoint=checkpoint.ref)

    def passes(entry: EvalEntry) -> bool:
        return entry.report.passed and not failing(check_gates(gates, entry.report.metrics))

    passing = [e for e in evals if passes(e)]
    latest = evals[-1] if evals else None
    failed = failing(check_gates(gates, latest.report.metrics)) if latest else []
    if latest is not None and not failed:
        failed = [GateResult(g.metric, g.op, g.value, g.actual, g.passed) for g in latest.report.gates if not g.passed]
    return Candidate(checkpoint, passing[-1] if passing else None, latest, failed)


def choose(registries: Registries, *, manifest: Manifest, source: str, gated: bool) -> Candidate:
    """The checkpoint `source` names. With gated (requireGates and no --force), `best` and
    `latest` choose among checkpoints with a passing eval, and GateFailedError (exit 8)
    says why none qualifies; a named checkpoint is returned as is (the caller checks it)."""
    if source not in WORDS:
        named = resolve_checkpoint(registries, manifest=manifest, which=source)
        return candidate(registries, manifest=manifest, checkpoint=named)
    repository = checkpoint_repository(registries, manifest=manifest)
    infos = list_checkpoints(registries, repository=repository)
    if not infos:
        raise NotFoundError(f"no checkpoint in {repository.repo_url}", hint="train first, or name a checkpoint")
    pool = [candidate(registries, manifest=manifest, checkpoint=_resolved(registries, i)) for i in infos]
    eligible = [c for c in pool if c.passing is not None] if gated else pool
    if not eligible:
        reasons = ", ".join(f"{c.checkpoint.ref.tag}: {c.why_not()}" for c in pool[-5:])
        raise GateFailedError(
            f"no checkpoint of {repository.repo_url} has a passing eval ({reasons})",
            hint="run `trainops eval run`, or release anyway with --force --reason TEXT",
        )
    if source == "latest":
        return max(eligible, key=lambda c: c.checkpoint.parsed.lineage().step or 0)
    metric, mode = ranking(manifest)
    by_digest = {c.checkpoint.manifest.digest: c for c in eligible}

    def value(info: CheckpointInfo) -> float | None:
        """The checkpoint's own metric (as retention ranks it), else its eval's."""
        if metric in info.metrics:
            return info.metrics[metric]
        entry = by_digest[info.digest].passing or by_digest[info.digest].latest
        return entry.report.metrics.get(metric) if entry is not None else None

    best = ranked([i for i in infos if i.digest in by_digest], metric=metric, mode=mode, value=value)
    if not best:
        raise NotFoundError(f"no eligible checkpoint of {repository.repo_url} has a {metric!r} metric to rank it")
    return by_digest[best[0].digest]


def _resolved(registries: Registries, info: CheckpointInfo) -> Resolved:
    return resolve(registries, ref=registries.ref(info.ref))
