"""Incidents in the browser: the failures of runs (registry/SPEC.md, "Incidents"), read from
the index by their annotations, listed per run and per node, with the nodes whose incidents
within the drain window reach the threshold flagged for draining."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from trainops import clock
from trainops.errors import NotFoundError
from trainops.faults import incidents as records
from trainops.registry import media
from trainops.ui.models import IncidentList, IncidentRow, NodeIncidents

if TYPE_CHECKING:
    from trainops.faults.report import RunReport
    from trainops.registry.context import Registries

MAX_ROWS = 5000


def _rows(db: sqlite3.Connection) -> list[IncidentRow]:
    found = db.execute(
        """SELECT r.url, a.digest, a.annotations, t.tag FROM artifacts a
           JOIN repos r ON r.id = a.repo_id JOIN tags t ON t.repo_id = a.repo_id AND t.digest = a.digest
           WHERE a.kind = 'other' AND json_extract(a.annotations, ?) IS NOT NULL
           ORDER BY json_extract(a.annotations, ?), t.tag LIMIT ?""",
        (f'$."{media.A_INCIDENT_CLASS}"', f'$."{media.A_INCIDENT_DETECTED}"', MAX_ROWS),
    )
    rows = []
    for r in found:
        notes = json.loads(r["annotations"])
        rows.append(
            IncidentRow(
                id=r["tag"],
                repository=r["url"],
                digest=r["digest"],
                run_id=notes.get(media.A_INCIDENT_RUN),
                fault=notes[media.A_INCIDENT_CLASS],
                node=notes.get(media.A_INCIDENT_NODE),
                detected=notes.get(media.A_INCIDENT_DETECTED),
            )
        )
    return rows


def _moment(text: str | None) -> datetime | None:
    try:
        return clock.parse(text) if text else None
    except ValueError:
        return None


def _nodes(rows: list[IncidentRow], *, threshold: int, window: timedelta) -> list[NodeIncidents]:
    out = []
    for node in sorted({r.node for r in rows if r.node}):
        mine = [r for r in rows if r.node == node]
        since = clock.now() - window
        recent = sum(1 for t in (_moment(r.detected) for r in mine) if t is not None and t >= since)
        faults = sorted({r.fault for r in mine})
        out.append(
            NodeIncidents(node=node, incidents=len(mine), in_window=recent, faults=faults, flagged=recent >= threshold)
        )
    return sorted(out, key=lambda n: (-n.in_window, -n.incidents, n.node))


def incidents(
    db: sqlite3.Connection,
    *,
    run: str | None = None,
    node: str | None = None,
    threshold: int = 3,
    window: float = 86400,
) -> IncidentList:
    """The incidents (of one run, or of one node), and every node's count."""
    rows = _rows(db)
    span = timedelta(seconds=window)
    shown = [r for r in rows if (run is None or r.run_id == run) and (node is None or r.node == node)]
    return IncidentList(
        run=run,
        node=node,
        threshold=threshold,
        window_seconds=window,
        incidents=shown,
        nodes=_nodes(rows, threshold=threshold, window=span),
    )


def run_report(db: sqlite3.Connection, registries: Registries, *, run: str) -> RunReport:
    """The post-incident report of a run whose incidents the index holds (read from their
    repository: trainops.faults.query.report_from)."""
    from trainops.faults.query import report_from  # lazy: loads statistics

    rows = [r for r in _rows(db) if r.run_id == run]
    if not rows:
        raise NotFoundError(f"no incident of run {run!r} is indexed", hint="the incidents page lists the runs")
    repository = registries.ref(rows[0].repository)
    first = records.read(registries, repository=repository, incident_id=rows[0].id)
    return report_from(registries, repository, pipeline=first.pipeline, run_id=run)
