"""Alertmanager's webhook → incidents: each firing and resolved SLO alert recorded as an incident of
the run or the release it names, beside the fault incidents (trainops.faults.incidents).

An alert is trainops' when it carries an `slo` label naming an SLO of the manifest
(trainops.slo.rules renders them so). Its subject:

- a training SLO: the `run` label (the supervisor's series carry it);
- a serving SLO: the `service` label, `<name>-canary` or `<name>-stable`, read against the
  rollout state in the GitOps repository: the release the canary (or stable) serves now.

The record: fault `slo-burn`, source `alertmanager`, action the severity (page, ticket), the SLO,
the burn rate (the alert's value), the evidence query and Alertmanager's fingerprint; a later
notification of the same alert (repeated, resolved) rewrites the same incident, resolved sets
`recovered` to the alert's end. Every alert of a notification is checked before anything is
written: a body that is not Alertmanager's, an SLO or subject trainops cannot name, and nothing
is recorded.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainops import clock
from trainops.errors import InputError
from trainops.faults import incidents as records
from trainops.faults.incidents import Incident
from trainops.manifest import Manifest
from trainops.manifest.slo_catalog import resolve
from trainops.registry.context import Registries
from trainops.rollout.context import serve_context

FAULT = "slo-burn"
SOURCE = "alertmanager"
MAX_BODY = 1024 * 1024
_WRITE = threading.Lock()  # one writer at a time: incident ids are numbered from the tags


class WebhookAlert(BaseModel):
    """One alert of Alertmanager's webhook payload (version 4); fields trainops does not read are kept out."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: str = Field(alias="startsAt")
    ends_at: str | None = Field(None, alias="endsAt")
    fingerprint: str = Field(min_length=1)
    generator_url: str | None = Field(None, alias="generatorURL")


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: str
    status: Literal["firing", "resolved"]
    alerts: list[WebhookAlert]


class BadAlert(InputError):
    """An alert trainops cannot record: an SLO or subject it cannot name (the receiver answers 422)."""


class MalformedAlert(BadAlert):
    """A body that is not Alertmanager's webhook notification (the receiver answers 400)."""


@dataclass(frozen=True)
class Recorded:
    """What one notification did: the incidents written, the alerts left alone (not trainops')."""

    incidents: list[Incident]
    ignored: int = 0


def parse(body: bytes) -> WebhookPayload:
    if len(body) > MAX_BODY:
        raise MalformedAlert(f"the body is {len(body)} bytes; a webhook notification is at most {MAX_BODY}")
    try:
        return WebhookPayload.model_validate(json.loads(body))
    except (ValueError, ValidationError) as err:
        first = str(err).splitlines()
        detail = "; ".join(line.strip() for line in first[:3])
        raise MalformedAlert(f"not an Alertmanager webhook notification: {detail}") from None


def _time(text: str | None) -> str | None:
    """An RFC 3339 time as trainops writes times; Alertmanager's zero time (no end) is None."""
    if not text or text.startswith("0001-01-01"):
        return None
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", text)  # Alertmanager writes nanoseconds
    try:
        return clock.iso(clock.parse(trimmed))
    except ValueError:
        raise MalformedAlert(f"{text!r} is not an RFC 3339 time") from None


@dataclass(frozen=True)
class _Planned:
    alert: WebhookAlert
    slo: str
    subject: Literal["run", "release"]
    subject_id: str


def _subject(
    manifest: Manifest, alert: WebhookAlert, slo_name: str, training: bool
) -> tuple[Literal["run", "release"], str]:
    if training:
        run = alert.labels.get("run")
        if not run:
            raise BadAlert(f"alert of {slo_name} has no run label: it names no run")
        return "run", run
    from trainops.rollout.flows import read_state  # lazy: loads ssl, socketserver

    service = alert.labels.get("service", "")
    name = serve_context(manifest).name
    track = service.removeprefix(f"{name}-") if service.startswith(f"{name}-") else ""
    if service and track not in ("canary", "stable"):
        raise BadAlert(f"alert of {slo_name}: service {service!r} is neither {name}-canary nor {name}-stable")
    state, _commit = read_state(manifest)
    served = {"canary": state.canary, "stable": state.stable}[track] if track else (state.canary or state.stable)
    if served is None:
        what = f"no {track}" if track else "no release"
        raise BadAlert(f"alert of {slo_name}: the GitOps repository serves {what} to record it against")
    return "release", served.version


def _plan(manifest: Manifest, payload: WebhookPayload, known: dict[str, Incident]) -> tuple[list[_Planned], int]:
    """Every alert checked and its subject named before anything is written; an alert recorded
    before (its fingerprint) keeps the subject it was recorded against (the canary may be gone)."""

    catalog = resolve(manifest.pipeline)
    pipeline = manifest.pipeline.metadata.name
    planned: list[_Planned] = []
    ignored = 0
    for alert in payload.alerts:
        name = alert.labels.get("slo")
        if name is None:
            ignored += 1  # another team's alert routed here: not trainops'
            continue
        slo = catalog.by_name(name)
        if slo is None:
            declared = ", ".join(s.name for s in catalog.slos) or "none"
            raise BadAlert(
                f"alert names SLO {name!r}, which {manifest.path.name} does not declare (its SLOs: {declared})"
            )
        theirs = alert.labels.get("pipeline", pipeline)
        if theirs != pipeline:
            raise BadAlert(f"alert of {name} is for pipeline {theirs!r}; this receiver records {pipeline!r}")
        _time(alert.starts_at), _time(alert.ends_at)  # checked before anything is written
        earlier = known.get(alert.fingerprint)
        if earlier is not None and earlier.subject is not None:
            planned.append(_Planned(alert, name, earlier.subject, earlier.run_id))
            continue
        subject, subject_id = _subject(manifest, alert, name, slo.subject == "training")
        planned.append(_Planned(alert, name, subject, subject_id))
    return planned, ignored


def _burn(alert: WebhookAlert) -> float | None:
    try:
        return float(alert.annotations.get("burn_rate", ""))
    except ValueError:
        return None


def record(manifest: Manifest, body: bytes, *, insecure: bool = False) -> Recorded:
    """Record every SLO alert of one webhook notification (see the module's docstring)."""
    payload = parse(body)
    pipeline = manifest.pipeline.metadata.name
    written: list[Incident] = []
    with _WRITE, Registries.for_manifest(manifest, insecure=insecure) as registries:
        repository = records.incidents_repository(registries, registry=manifest.pipeline.spec.registry,
                                                  pipeline=pipeline)  # fmt: skip
        known = {i.fingerprint: i for i in records.list_incidents(registries, repository=repository) if i.fingerprint}
        planned, ignored = _plan(manifest, payload, known)
        for item in planned:
            alert = item.alert
            earlier = known.get(alert.fingerprint)
            incident_id = earlier.id if earlier else records.next_id(registries, repository=repository,
                                                                       run_id=item.subject_id)  # fmt: skip
            started = _time(alert.starts_at) or clock.now_utc()
            burn = _burn(alert)
            query = alert.annotations.get("query")
            severity = alert.labels.get("severity", "page")
            evidence = [alert.annotations.get("description", ""), f"query: {query}" if query else ""]
            incident = Incident(
                id=incident_id,
                pipeline=pipeline,
                run_id=item.subject_id,
                fault=FAULT,
                detail=alert.annotations.get("summary", f"{item.slo} burns its error budget"),
                source=SOURCE,
                evidence=[line for line in [*evidence, alert.generator_url or ""] if line],
                action=severity,
                action_note=f"Alertmanager: {alert.status}" + (f" (burn rate {burn:.3g})" if burn is not None else ""),
                evidence_at=earlier.evidence_at if earlier else started,
                detected=earlier.detected if earlier else clock.now_utc(),
                recovered=(_time(alert.ends_at) or clock.now_utc()) if alert.status == "resolved" else None,
                slo=item.slo,
                subject=item.subject,
                burn_rate=burn if burn is not None else (earlier.burn_rate if earlier else None),
                query=query,
                fingerprint=alert.fingerprint,
            )
            records.save(registries, repository=repository, incident=incident)
            known[alert.fingerprint] = incident
            written.append(incident)
    return Recorded(written, ignored)


def serialize_body(recorded: Recorded) -> dict[str, Any]:
    return {"recorded": [i.id for i in recorded.incidents], "ignored": recorded.ignored}
