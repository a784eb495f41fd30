"""Reads of the browser's index: every page and API answer is one function here.

Only the index is read (no registry round trip), so pages cost milliseconds however many
artifacts the registries hold. Functions raise NotFoundError/InputError for what a user
asked for that does not exist or makes no sense.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from trainops import clock
from trainops.errors import InputError, NotFoundError
from trainops.registry import media
from trainops.registry.artifact import parse_manifest
from trainops.registry.backends.base import ManifestData
from trainops.registry.chunks.index import files_of
from trainops.registry.inspect import FileInfo, diff_files
from trainops.registry.media import PRUNED_TAG_PREFIX
from trainops.signing.provenance import dependency_text
from trainops.ui.models import (
    Artifact,
    Curve,
    CurvePoint,
    DiffResult,
    FileChangeRow,
    FileRow,
    Link,
    Provenance,
    Referrer,
    RepositoryList,
    RepositorySummary,
    SearchHit,
    SearchResult,
    Signing,
    TagPage,
    TagRow,
)

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
HEX_PREFIX = re.compile(r"^(sha256:)?[0-9a-f]{4,64}$")
A_EVAL_PASSED = "dev.trainops.eval.passed"  # an eval report's verdict (registry/SPEC.md, eval reports)
MAX_PER_PAGE = 500
MAX_HITS = 200
_VISIBLE = f"tag NOT LIKE '{PRUNED_TAG_PREFIX}%'"
# The first visible tag (natural order) of artifact row `a`; looked up by (repo, digest), not
# by scanning the repository's tags in order, which costs a scan per row
TAG_OF = f"""(SELECT t.tag FROM tags t INDEXED BY tags_repo_digest WHERE t.repo_id = a.repo_id
    AND t.digest = a.stored AND t.{_VISIBLE} ORDER BY t.natural LIMIT 1)"""


def repositories(db: sqlite3.Connection) -> RepositoryList:
    rows = db.execute(
        f"""SELECT r.url, r.registry, r.refreshed,
                  (SELECT COUNT(*) FROM artifacts a WHERE a.repo_id = r.id AND a.pruned = 0) AS artifacts,
                  (SELECT COUNT(*) FROM tags t WHERE t.repo_id = r.id AND {_VISIBLE}) AS tags,
                  (SELECT MAX(created) FROM artifacts a WHERE a.repo_id = r.id AND a.pruned = 0) AS last_push
           FROM repos r ORDER BY r.url"""
    )
    return RepositoryList(
        repositories=[
            RepositorySummary(
                url=r["url"],
                registry=r["registry"],
                artifacts=r["artifacts"],
                tags=r["tags"],
                last_push=_time(r["last_push"]),
                refreshed=None if r["refreshed"] is None else clock.iso(clock.at(r["refreshed"])),
            )
            for r in rows
        ]
    )


def repo_id(db: sqlite3.Connection, url: str) -> int:
    row = db.execute("SELECT id FROM repos WHERE url = ?", (url,)).fetchone()
    if row is None:
        raise NotFoundError(f"no repository {url} in the index", hint="pick one on the repositories page")
    return int(row["id"])


def tags(db: sqlite3.Connection, *, repository: str, page: int = 1, per_page: int = 100) -> TagPage:
    """One page of a repository's tags in natural order (step-9 before step-10)."""
    if page < 1 or not 1 <= per_page <= MAX_PER_PAGE:
        raise InputError(f"page must be ≥ 1 and perPage 1..{MAX_PER_PAGE}")
    rid = repo_id(db, repository)
    total = db.execute(f"SELECT COUNT(*) FROM tags WHERE repo_id = ? AND {_VISIBLE}", (rid,)).fetchone()[0]
    rows = db.execute(
        f"""SELECT t.tag, t.digest, a.kind, a.size, a.created, a.step, a.run_id, a.metrics
           FROM tags t JOIN artifacts a ON a.repo_id = t.repo_id AND a.stored = t.digest
           WHERE t.repo_id = ? AND {_VISIBLE} ORDER BY t.natural LIMIT ? OFFSET ?""",
        (rid, per_page, (page - 1) * per_page),
    )
    items = [
        TagRow(
            tag=r["tag"],
            digest=r["digest"],
            kind=r["kind"],
            size=r["size"],
            created=_time(r["created"]),
            step=r["step"],
            run_id=r["run_id"],
            metrics=json.loads(r["metrics"]),
        )
        for r in rows
    ]
    return TagPage(repository=repository, total=total, page=page, per_page=per_page, tags=items)


def artifact_row(db: sqlite3.Connection, digest: str, repository: str | None) -> sqlite3.Row:
    if not DIGEST.match(digest):
        raise InputError(f"{digest!r} is not a digest", hint="write sha256: and 64 hex digits")
    sql = "SELECT a.*, r.url FROM artifacts a JOIN repos r ON r.id = a.repo_id WHERE a.digest = ?"
    args: tuple[Any, ...] = (digest,)
    if repository:
        sql, args = sql + " AND r.url = ?", (digest, repository)
    row: sqlite3.Row | None = db.execute(sql + " ORDER BY a.pruned, r.url LIMIT 1", args).fetchone()
    if row is None:
        where = f" in {repository}" if repository else ""
        raise NotFoundError(f"no artifact {digest}{where} in the index", hint="search for it by tag or digest prefix")
    return row


def _files(manifest_text: str, digest: str) -> list[FileRow]:
    parsed = parse_manifest(ManifestData(manifest_text.encode(), "", digest))
    return [
        FileRow(path=f.path, size=f.size, media_type=f.media_type, digest=f.digest, chunked=f.chunked)
        for f in files_of(parsed, digest[:19])
    ]


def _where(db: sqlite3.Connection, digest: str) -> sqlite3.Row | None:
    """The first indexed place of a digest: repository, tag, kind, pruned."""
    row: sqlite3.Row | None = db.execute(
        f"""SELECT r.url, a.kind, a.pruned, {TAG_OF} AS tag
           FROM artifacts a JOIN repos r ON r.id = a.repo_id WHERE a.digest = ? ORDER BY a.pruned, r.url LIMIT 1""",
        (digest,),
    ).fetchone()
    return row


def _link(db: sqlite3.Connection, digest: str, relation: str, ref: str) -> Link:
    found = _where(db, digest)
    if found is None:
        return Link(digest=digest, relation=relation, ref=ref, missing=True)
    return Link(
        digest=digest,
        relation=relation,
        ref=ref,
        repository=found["url"],
        tag=found["tag"],
        kind=found["kind"],
        pruned=bool(found["pruned"]),
    )


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _referrer(row: sqlite3.Row) -> Referrer:
    """A referrer; for an eval report also its gates and verdict (from its report file, else its config)."""
    report = _json_object(row["report"])
    found = report.get("gates", _json_object(row["config"]).get("gates"))
    gates = [g if isinstance(g, dict) else {"gate": g} for g in found] if isinstance(found, list) else []
    annotations = {k: v for k, v in json.loads(row["annotations"]).items() if k != "dev.trainops.lineage"}
    verdict = annotations.get(A_EVAL_PASSED, report.get("passed"))
    passed = None if verdict is None else verdict in (True, "true")
    return Referrer(
        digest=row["digest"],
        repository=row["url"],
        kind=row["kind"],
        artifact_type=row["artifact_type"],
        created=_time(row["created"]),
        annotations=annotations,
        metrics=json.loads(row["metrics"]),
        gates=gates,
        passed=passed,
    )


def artifact(db: sqlite3.Connection, *, digest: str, repository: str | None = None) -> Artifact:
    """An artifact with its files, lineage links and referrers."""
    row = artifact_row(db, digest, repository)
    tag_rows = db.execute(
        "SELECT tag FROM tags WHERE repo_id = ? AND digest = ? ORDER BY natural", (row["repo_id"], row["stored"])
    )
    parents = db.execute("SELECT DISTINCT parent, relation, ref FROM edges WHERE child = ?", (digest,)).fetchall()
    children = db.execute(
        "SELECT DISTINCT e.child, e.relation, r.url FROM edges e JOIN repos r ON r.id = e.repo_id WHERE e.parent = ?",
        (digest,),
    ).fetchall()
    referrers = db.execute(
        "SELECT a.*, r.url FROM artifacts a JOIN repos r ON r.id = a.repo_id WHERE a.subject = ? ORDER BY a.created",
        (digest,),
    ).fetchall()
    annotations = json.loads(row["annotations"])
    annotations.pop("dev.trainops.lineage", None)
    return Artifact(
        repository=row["url"],
        digest=digest,
        tags=[t["tag"] for t in tag_rows],
        kind=row["kind"],
        artifact_type=row["artifact_type"],
        media_type=row["media_type"],
        created=_time(row["created"]),
        size=row["size"],
        pruned=bool(row["pruned"]),
        files=_files(row["manifest"], row["stored"]),
        annotations=dict(sorted(annotations.items())),
        lineage={k: v for k, v in json.loads(row["lineage"]).items() if k != "parents"},
        config=row["config"],
        shared_with_parent=row["shared_with_parent"],
        parents=[_link(db, p["parent"], p["relation"], p["ref"]) for p in parents],
        children=[_link(db, c["child"], c["relation"], c["url"]) for c in children if c["relation"] != "describes"],
        referrers=[_referrer(r) for r in referrers],
        signing=_signing(referrers),
    )


def _signing(referrers: list[sqlite3.Row]) -> Signing | None:
    """The model signatures (their keys) and the SLSA provenance among an artifact's referrers."""
    keys: set[str] = set()
    provenance = None
    for row in referrers:
        notes = json.loads(row["annotations"])
        predicate = notes.get(media.A_BUNDLE_PREDICATE)
        if predicate == media.MODEL_SIGNING_PREDICATE:
            keys.add(notes.get(media.A_SIGNING_KEY) or "a key it does not name")
        elif predicate == media.SLSA_PROVENANCE:
            provenance = _provenance(_json_object(row["report"]).get("predicate")) or provenance
    if not keys and provenance is None:
        return None
    return Signing(signed=bool(keys), keys=sorted(keys), provenance=provenance)


def _provenance(predicate: Any) -> Provenance | None:
    if not isinstance(predicate, dict):
        return None

    def part(body: dict[str, Any], key: str) -> dict[str, Any]:
        value = body.get(key)
        return value if isinstance(value, dict) else {}

    build, run = part(predicate, "buildDefinition"), part(predicate, "runDetails")
    builder, external = part(run, "builder"), part(build, "externalParameters")
    deps = build.get("resolvedDependencies")
    forced = external.get("forced")
    return Provenance(
        builder=str(builder["id"]) if builder.get("id") else None,
        build_type=str(build["buildType"]) if build.get("buildType") else None,
        forced=forced if isinstance(forced, dict) else None,
        dependencies=[f"{d.get('name')} {dependency_text(d)}" for d in deps if isinstance(d, dict)]
        if isinstance(deps, list)
        else [],
    )


def curve(db: sqlite3.Connection, *, repository: str, metric: str | None = None) -> Curve:
    """A metric against step over a repository's checkpoints (pruned ones included, marked)
    and their eval reports (at their checkpoint's step): every metric its tag table shows."""
    rid = repo_id(db, repository)
    rows = db.execute(
        f"""SELECT * FROM (
              SELECT a.digest, COALESCE(a.step, (SELECT c.step FROM artifacts c
                       WHERE c.digest = a.subject AND c.repo_id = a.repo_id)) AS step,
                     a.metrics, a.pruned, {TAG_OF} AS tag
              FROM artifacts a WHERE a.repo_id = ? AND a.kind IN ('checkpoint', 'eval'))
           WHERE step IS NOT NULL ORDER BY step""",
        (rid,),
    ).fetchall()
    parsed = [(r, json.loads(r["metrics"])) for r in rows]
    names = sorted({name for _, m in parsed for name in m})
    if metric is not None and metric not in names:
        raise NotFoundError(f"no checkpoint of {repository} records the metric {metric!r}", hint="pick one of the list")
    chosen = metric or (names[0] if names else None)
    points = [
        CurvePoint(step=r["step"], value=m[chosen], digest=r["digest"], tag=r["tag"], pruned=bool(r["pruned"]))
        for r, m in parsed
        if chosen is not None and chosen in m
    ]
    return Curve(repository=repository, metric=chosen, metrics=names, points=points)


def _file_infos(db: sqlite3.Connection, digest: str, repository: str | None) -> tuple[str, list[FileInfo]]:
    row = artifact_row(db, digest, repository)
    files = [FileInfo(f.path, f.size, f.digest, f.media_type) for f in _files(row["manifest"], row["stored"])]
    return f"{row['url']}@{digest}", files


def diff(db: sqlite3.Connection, *, a: str, b: str, repository: str | None = None) -> DiffResult:
    """The files added, removed and modified from artifact a to artifact b."""
    left, old = _file_infos(db, a, repository)
    right, new = _file_infos(db, b, repository)
    found = diff_files(a=left, b=right, old_files=old, new_files=new)

    def rows(changes: list[Any]) -> list[FileChangeRow]:
        return [FileChangeRow(path=c.path, old=_row(c.old), new=_row(c.new)) for c in changes]

    return DiffResult(
        a=found.a,
        b=found.b,
        same=found.same,
        added=rows(found.added),
        removed=rows(found.removed),
        modified=rows(found.modified),
        unchanged=found.unchanged,
        bytes_shared=found.bytes_shared,
    )


def _row(info: FileInfo | None) -> FileRow | None:
    return (
        None
        if info is None
        else FileRow(path=info.path, size=info.size, media_type=info.media_type, digest=info.digest)
    )


_TAG_TEXT = re.compile(r"^[A-Za-z0-9_.-]+$")
_COMMIT_PREFIX = re.compile(r"^[0-9a-f]{4,64}(-dirty)?$")


# a tag search starts from the tags (index on tag), the others from the artifacts
_FROM_TAGS = f"""tags t JOIN artifacts a ON a.repo_id = t.repo_id AND a.stored = t.digest AND t.{_VISIBLE}
    JOIN repos r ON r.id = a.repo_id"""
_FROM_ARTIFACTS = f"""artifacts a JOIN repos r ON r.id = a.repo_id
    LEFT JOIN tags t ON t.repo_id = a.repo_id AND t.digest = a.stored AND t.{_VISIBLE}"""


def _conditions(q: str) -> list[tuple[str, str, str]]:
    """(what matched, SQL condition, argument) for each way q can name an artifact. Prefixes
    are GLOBs over characters that cannot be wildcards, so they use the indexes."""
    found = [("runId", "a.run_id = ?", q)]
    if _TAG_TEXT.match(q):
        found.insert(0, ("tag", "t.tag GLOB ?", q + "*"))
    if HEX_PREFIX.match(q):
        found.append(("digest", "a.digest GLOB ?", ("" if q.startswith("sha256:") else "sha256:") + q + "*"))
    if _COMMIT_PREFIX.match(q):
        found.append(("gitCommit", "a.git_commit GLOB ?", q + "*"))
    return found


# What a search trims: ASCII whitespace only, the same set the API's schema pattern names.
# str.strip() and a regex's \s disagree across engines (Python counts \x1c-\x1f and \x85,
# ECMAScript does not), and a query the schema accepts must not be refused as empty.
SEARCH_BLANKS = " \t\n\r\f\v"
SEARCH_PATTERN = r"[^ \t\n\r\f\v]"


def search(db: sqlite3.Connection, *, query: str) -> SearchResult:
    """Artifacts whose tag (prefix), digest (prefix), git commit (prefix) or run id matches query."""
    q = query.strip(SEARCH_BLANKS)
    if not q or len(q) > 200:
        raise InputError("a search needs 1 to 200 characters", hint="type a tag, a digest prefix, a commit or a run id")
    hits: dict[tuple[str, str, str | None], SearchHit] = {}
    for matched, condition, arg in _conditions(q):
        source = _FROM_TAGS if matched == "tag" else _FROM_ARTIFACTS
        rows = db.execute(
            f"""SELECT r.url, a.digest, a.kind, a.created, t.tag FROM {source}
                WHERE {condition} ORDER BY r.url, t.natural LIMIT ?""",
            (arg, MAX_HITS + 1),
        )
        for r in rows:
            hit = SearchHit(
                repository=r["url"],
                digest=r["digest"],
                tag=r["tag"],
                kind=r["kind"],
                created=_time(r["created"]),
                matched=matched,
            )
            hits.setdefault((r["url"], r["digest"], r["tag"]), hit)
    found = list(hits.values())
    return SearchResult(query=q, hits=found[:MAX_HITS], truncated=len(found) > MAX_HITS)


def _time(text: str | None) -> str | None:
    """An artifact's `created` (stamped to the second) as every time in the API reads."""
    return None if text is None else clock.one_precision(text)
