"""The SLO gate of a canary step: the canary judged by the same SLOs that alert.

For every serving SLO of the model, over the step's window (its pause, else
spec.slo.canaryWindow):

- the canary's SLI: 1 − its error ratio (the SLO's own recording-rule expression, on the
  canary Service's series);
- its burn rate, error ratio / budget, against the stable's over the same window.

A canary fails an SLO when its SLI is under the objective AND it burns faster than the stable
(a stable burning as fast says the trouble is not the canary's: it passes, said so). No canary
data is no evidence: nothing is promoted. `rollout promote --auto` measures this itself; the
AnalysisTemplate trainops renders for Argo Rollouts carries one metric per SLO whose query is
the canary's burn rate where it burns faster than the stable, else 0 (success: ≤ 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainops.errors import GateFailedError, InputError
from trainops.eval.gates import check_gates, failing
from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.slo_catalog import Slo, resolve
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.reference import parse_reference
from trainops.rollout.analysis import prometheus_query
from trainops.rollout.context import serve_context
from trainops.slo.render import pooled, track_matchers
from trainops.slo.rules import error_ratio, promql_duration


@dataclass(frozen=True)
class SloJudgement:
    slo: str
    objective: float  # percent
    canary_sli: float
    canary_burn: float
    stable_burn: float | None
    window: str

    @property
    def ok(self) -> bool:
        below = self.canary_sli * 100 < self.objective
        faster = self.stable_burn is None or self.canary_burn > self.stable_burn
        return not (below and faster)

    def text(self) -> str:
        stable = "no stable data" if self.stable_burn is None else f"stable burn {self.stable_burn:.3g}"
        verdict = "ok" if self.ok else "FAILED"
        note = ""
        if self.ok and self.canary_sli * 100 < self.objective:
            note = " (under the objective, but the stable burns as fast)"
        return (
            f"slo {self.slo}: canary SLI {self.canary_sli * 100:.3f}% over {self.window} "
            f"(objective {self.objective:g}%), burn {self.canary_burn:.3g} vs {stable}: {verdict}{note}"
        )


def slo_interval(manifest: Manifest) -> float:
    """Seconds a canary step is judged by the SLOs when its pause does not say: spec.slo.canaryWindow."""
    spec = manifest.pipeline.spec.slo
    return duration_seconds(spec.canary_window if spec is not None else "5m")


def _matchers(manifest: Manifest, model: str, track: str) -> str:
    return track_matchers(manifest, serve_context(manifest).name, model, track)


def canary_queries(manifest: Manifest, slo: Slo, window: str) -> tuple[str, str]:
    """The canary's and the stable's error ratio over window, each one number (sum over series)."""
    rollout = manifest.pipeline.spec.rollout
    assert rollout is not None and slo.model is not None
    engine = rollout.engine
    pools = pooled(manifest)
    canary, stable = (
        error_ratio(slo, engine=engine, matchers=_matchers(manifest, slo.model, track), window=window, pools=pools)
        for track in ("canary", "stable")
    )
    return f"sum({canary})", f"sum({stable})"


def analysis_query(manifest: Manifest, slo: Slo, window: str) -> str:
    """For Argo Rollouts: the canary's burn rate where it burns faster than the stable, else 0."""
    canary, stable = canary_queries(manifest, slo, window)
    return f"({canary} / {slo.budget:g}) * ({canary} > bool ({stable} or vector(0)))"


def _value(url: str, query: str, slo: str) -> float | None:
    data = prometheus_query(url, query)
    result = data.get("result") or []
    if len(result) > 1:
        raise InputError(f"slo {slo}: the gate's query returned {len(result)} series, not one number")
    if not result:
        return None
    value = float(result[0].get("value", [None, "NaN"])[1])
    return None if math.isnan(value) else value


def serving_slos(manifest: Manifest) -> list[Slo]:
    return resolve(manifest.pipeline).serving()


def judge(manifest: Manifest, *, window_seconds: float) -> list[SloJudgement]:
    """Every serving SLO's judgement of the canary over the last window_seconds."""
    spec = manifest.pipeline.spec.slo
    assert spec is not None
    window = promql_duration(window_seconds)
    out = []
    for slo in serving_slos(manifest):
        canary_q, stable_q = canary_queries(manifest, slo, window)
        canary = _value(spec.prometheus, canary_q, slo.name)
        if canary is None:
            raise GateFailedError(
                f"slo {slo.name}: Prometheus has no canary data over {window}; the canary cannot be judged, "
                "nothing was promoted",
                hint="check that Prometheus scrapes the canary Service and that the canary takes traffic",
            )
        stable = _value(spec.prometheus, stable_q, slo.name)
        out.append(SloJudgement(
            slo=slo.name, objective=slo.objective, canary_sli=1 - canary, canary_burn=canary / slo.budget,
            stable_burn=None if stable is None else stable / slo.budget, window=window,
        ))  # fmt: skip
    return out


@dataclass(frozen=True)
class EvalJudgement:
    """The canary release's eval gate, re-applied with today's eval.gates."""

    release: str
    ok: bool
    text: str


def eval_gate(manifest: Manifest, release: str, *, insecure: bool = False) -> EvalJudgement:
    """The eval the release was made with (its annotation), against today's eval.gates. A release
    forced past its gate fails; one with no eval recorded (a model pushed outside `release
    create`) passes with a note: nothing to re-check."""
    from trainops.eval.report import read_report  # lazy: loads sqlite3
    from trainops.registry.store import resolve as resolve_ref  # lazy: loads sqlite3

    ref = parse_reference(release)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        notes = resolve_ref(registries, ref=ref).parsed.annotations
        version = notes.get(media.A_VERSION) or ref.tag or release
        if notes.get(media.A_RELEASE_FORCED) == "true":
            why = notes.get(media.A_RELEASE_REASON, "")
            return EvalJudgement(
                version, False, f"eval gate: release {version} was forced past its gate ({why}): FAILED"
            )
        report_ref = notes.get(media.A_RELEASE_EVAL)
        if report_ref is None:
            return EvalJudgement(version, True, f"eval gate: release {version} records no eval (nothing to re-check)")
        report = read_report(registries, ref=parse_reference(report_ref)).report
    gates = manifest.pipeline.spec.eval.gates if manifest.pipeline.spec.eval is not None else []
    failed = failing(check_gates(gates, report.metrics))
    if not report.passed or failed:
        detail = "; ".join(g.describe() for g in failed) or "its eval failed"
        return EvalJudgement(version, False, f"eval gate: release {version}: {detail}: FAILED")
    return EvalJudgement(version, True, f"eval gate: release {version} passes today's eval.gates: ok")
