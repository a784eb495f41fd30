"""The JSON API under /api: a table of read-only endpoints, each one query of the index,
and the OpenAPI 3.1 document generated from that table and the pydantic models."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from trainops import __version__
from trainops.errors import InputError
from trainops.ui import graph, incidents, models, queries


@dataclass(frozen=True)
class Param:
    name: str
    where: Literal["query", "path"]
    kind: Literal["string", "integer"] = "string"
    required: bool = False
    description: str = ""
    pattern: str | None = None
    default: int | None = None
    maximum: int | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class Endpoint:
    path: str
    name: str
    summary: str
    model: type[BaseModel]
    call: Callable[[sqlite3.Connection, dict[str, Any]], BaseModel]
    params: list[Param] = field(default_factory=list)


DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_REPO = Param("repository", "query", description="Repository URL, as /api/repositories lists it.")


def _int(args: dict[str, Any], name: str, default: int) -> int:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"{name} must be an integer, not {raw!r}") from None


def _need(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not value:
        raise InputError(f"the query parameter {name!r} is required")
    return str(value)


def _index() -> models.ApiIndex:
    """The endpoints of this table (itself included), as /api lists them."""
    listed = [
        models.ApiEndpoint(
            path=e.path, summary=e.summary, parameters=[p.name for p in sorted(e.params, key=lambda p: not p.required)]
        )
        for e in ENDPOINTS
    ]
    return models.ApiIndex(endpoints=listed, openapi="/openapi.json")


ENDPOINTS: list[Endpoint] = [
    Endpoint(
        "/api", "index", "The API's endpoints, and its OpenAPI document.", models.ApiIndex, lambda db, a: _index()
    ),
    Endpoint(
        "/api/repositories",
        "repositories",
        "Every indexed repository with its artifact and tag counts and its newest artifact's created time.",
        models.RepositoryList,
        lambda db, a: queries.repositories(db),
    ),
    Endpoint(
        "/api/tags",
        "tags",
        "One page of a repository's tags, in natural order.",
        models.TagPage,
        lambda db, a: queries.tags(
            db, repository=_need(a, "repository"), page=_int(a, "page", 1), per_page=_int(a, "perPage", 100)
        ),
        [
            Param("repository", "query", required=True, description=_REPO.description),
            Param("page", "query", "integer", default=1),
            Param("perPage", "query", "integer", default=100, maximum=queries.MAX_PER_PAGE),
        ],
    ),
    Endpoint(
        "/api/artifacts/{digest}",
        "artifact",
        "An artifact: files, annotations, config, lineage parents and children, referrers.",
        models.Artifact,
        lambda db, a: queries.artifact(db, digest=a["digest"], repository=a.get("repository")),
        [Param("digest", "path", required=True, pattern=DIGEST_PATTERN), _REPO],
    ),
    Endpoint(
        "/api/lineage/{digest}",
        "lineage",
        "The lineage graph around an artifact (ancestors and descendants, git commits).",
        models.LineageGraph,
        lambda db, a: graph.lineage(db, digest=a["digest"], repository=a.get("repository")),
        [Param("digest", "path", required=True, pattern=DIGEST_PATTERN), _REPO],
    ),
    Endpoint(
        "/api/curve",
        "curve",
        "A metric against step over a repository's checkpoints.",
        models.Curve,
        lambda db, a: queries.curve(db, repository=_need(a, "repository"), metric=a.get("metric") or None),
        [Param("repository", "query", required=True, description=_REPO.description), Param("metric", "query")],
    ),
    Endpoint(
        "/api/diff",
        "diff",
        "Files added, removed and modified from artifact a to artifact b.",
        models.DiffResult,
        lambda db, a: queries.diff(db, a=_need(a, "a"), b=_need(a, "b"), repository=a.get("repository")),
        [
            Param("a", "query", required=True, pattern=DIGEST_PATTERN),
            Param("b", "query", required=True, pattern=DIGEST_PATTERN),
            _REPO,
        ],
    ),
    Endpoint(
        "/api/incidents",
        "incidents",
        "Failures of training runs (of one run or node), and every node's count (3 in 24 h flag a drain).",
        models.IncidentList,
        lambda db, a: incidents.incidents(db, run=a.get("run") or None, node=a.get("node") or None),
        [Param("run", "query", max_length=200), Param("node", "query", max_length=200)],
    ),
    Endpoint(
        "/api/search",
        "search",
        "Artifacts by tag, digest prefix, git commit (prefix) or run id.",
        models.SearchResult,
        lambda db, a: queries.search(db, query=_need(a, "q")),
        [
            Param(
                "q",
                "query",
                required=True,
                description="What to look for (1-200 characters).",
                pattern=queries.SEARCH_PATTERN,
                max_length=200,
            )
        ],
    ),
]


def _parameter(p: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": p.kind}
    if p.pattern:
        schema["pattern"] = p.pattern
    if p.default is not None:
        schema["default"] = p.default
    if p.kind == "integer":
        schema["minimum"] = 1
        if p.maximum is not None:
            schema["maximum"] = p.maximum
    elif p.required:
        schema["minLength"] = 1
    if p.max_length is not None:
        schema["maxLength"] = p.max_length
    out: dict[str, Any] = {"name": p.name, "in": p.where, "required": p.required, "schema": schema}
    if p.description:
        out["description"] = p.description
    return out


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the JSON API."""
    all_models: list[type[BaseModel]] = [e.model for e in ENDPOINTS] + [models.ErrorBody]
    _, defs = models_json_schema(
        [(m, "serialization") for m in all_models], ref_template="#/components/schemas/{model}"
    )
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    paths: dict[str, Any] = {}
    for e in ENDPOINTS:
        ok = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{e.model.__name__}"}}}}
        paths[e.path] = {
            "get": {
                "operationId": e.name,
                "summary": e.summary,
                "parameters": [_parameter(p) for p in e.params],
                "responses": {
                    "200": {"description": "OK", **ok},
                    "400": {"description": "Bad request", **error},
                    "401": {"description": "A token is required", **error},
                    "404": {"description": "Not found", **error},
                    "502": {"description": "A registry failed", **error},
                },
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "trainops registry browser", "version": __version__},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {})},
    }
