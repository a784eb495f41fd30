"""What the registry browser serves: one pydantic model per page, the same for the HTML
pages and the JSON API under /api (keys camelCase; the OpenAPI schema comes from these)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from trainops.manifest.common import StrictModel as _ManifestModel


class StrictModel(_ManifestModel):
    """The manifest's strict model (extra="forbid", frozen, camelCase on the wire), built by
    field name in code as well."""

    model_config = ConfigDict(**{**_ManifestModel.model_config, "validate_by_name": True})


class RepositorySummary(StrictModel):
    url: str = Field(description="The repository's URL (file://, oci:// or s3://).")
    registry: str = Field(description="The registry URL it was found under.")
    artifacts: int
    tags: int
    last_push: str | None = Field(
        None,
        description="The newest `created` of its artifacts (RFC 3339): per registry/SPEC.md, SOURCE_DATE_EPOCH or "
        "the newest file's mtime, not the time of a push (the name is kept for API compatibility).",
    )
    refreshed: str | None = Field(None, description="When the index last read it (ISO 8601 UTC).")


class ApiEndpoint(StrictModel):
    path: str
    summary: str
    parameters: list[str] = Field(default_factory=list, description="Its query parameters (required ones first).")


class ApiIndex(StrictModel):
    """What /api answers: every endpoint, and where the OpenAPI document describes them."""

    endpoints: list[ApiEndpoint]
    openapi: str = Field(description="The OpenAPI 3.1 document's path.")


class RepositoryList(StrictModel):
    repositories: list[RepositorySummary]


class TagRow(StrictModel):
    tag: str
    digest: str
    kind: str
    size: int
    created: str | None = None
    step: int | None = None
    run_id: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)


class TagPage(StrictModel):
    repository: str
    total: int
    page: int
    per_page: int
    tags: list[TagRow]


class FileRow(StrictModel):
    path: str
    size: int
    media_type: str
    digest: str
    chunked: bool = Field(False, description="Stored as chunks in packs: the digest is the file's, no blob's.")


class Link(StrictModel):
    """A parent or child of an artifact, as the index knows it."""

    digest: str
    relation: str
    ref: str = Field(description="Where the lineage record says it lives.")
    repository: str | None = Field(None, description="The indexed repository holding it; null when not indexed.")
    tag: str | None = None
    kind: str = "unknown"
    pruned: bool = False
    missing: bool = Field(False, description="Named in lineage but found in no indexed repository.")


class Referrer(StrictModel):
    """A manifest whose OCI subject is this artifact (eval reports, attestations...)."""

    digest: str
    repository: str
    kind: str
    artifact_type: str | None = None
    created: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    gates: list[dict[str, Any]] = Field(
        default_factory=list, description="An eval report's gates (metric, op, value, actual, passed), if it has any."
    )
    passed: bool | None = Field(None, description="An eval report's verdict; null for other referrers.")


class Provenance(StrictModel):
    """What an artifact's SLSA provenance says (as recorded; `trainops release verify` checks it)."""

    builder: str | None = None
    build_type: str | None = None
    forced: dict[str, Any] | None = Field(None, description="reason and by, for a release made past a failing gate.")
    dependencies: list[str] = Field(default_factory=list, description="Each resolved dependency: name and URI.")


class Signing(StrictModel):
    """Whether an artifact carries a model signature, by which keys, and its provenance."""

    signed: bool
    keys: list[str] = Field(default_factory=list, description="Fingerprints (sha256:…) of the keys that signed it.")
    provenance: Provenance | None = None


class Artifact(StrictModel):
    repository: str
    digest: str
    tags: list[str]
    kind: str
    artifact_type: str | None = None
    media_type: str
    created: str | None = None
    size: int
    pruned: bool = False
    files: list[FileRow]
    annotations: dict[str, str]
    lineage: dict[str, Any]
    config: str | None = Field(None, description="The config blob as text, when it is small JSON.")
    shared_with_parent: int | None = Field(
        None, description="A chunked checkpoint: bytes of its files found in its first parent's chunks."
    )
    parents: list[Link]
    children: list[Link]
    referrers: list[Referrer]
    signing: Signing | None = Field(None, description="Model signatures and SLSA provenance attached, if any.")


class GraphNode(StrictModel):
    id: str = Field(
        description="A digest, git:<commit> for a source commit, or commit:<sha> for a GitOps rollout commit."
    )
    kind: str
    label: str
    repository: str | None = None
    tag: str | None = None
    step: int | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    git_commit: str | None = None
    pruned: bool = False
    missing: bool = False


class GraphEdge(StrictModel):
    child: str
    parent: str
    relation: str


class LineageGraph(StrictModel):
    root: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class CurvePoint(StrictModel):
    step: int
    value: float
    digest: str
    tag: str | None = None
    pruned: bool = False


class Curve(StrictModel):
    repository: str
    metric: str | None = Field(None, description="The metric plotted (null when the checkpoints record none).")
    metrics: list[str] = Field(description="Every metric the repository's checkpoints record.")
    points: list[CurvePoint]


class FileChangeRow(StrictModel):
    path: str
    old: FileRow | None = None
    new: FileRow | None = None


class DiffResult(StrictModel):
    a: str
    b: str
    same: bool
    added: list[FileChangeRow]
    removed: list[FileChangeRow]
    modified: list[FileChangeRow]
    unchanged: int
    bytes_shared: int


class SearchHit(StrictModel):
    repository: str
    digest: str
    tag: str | None = None
    kind: str
    created: str | None = None
    matched: str = Field(description="What matched: tag, digest, gitCommit or runId.")


class SearchResult(StrictModel):
    query: str
    hits: list[SearchHit]
    truncated: bool


class ErrorBody(StrictModel):
    error: str
    status: int


class IncidentRow(StrictModel):
    id: str = Field(description="The incident's id (its tag, RUN.N).")
    repository: str
    digest: str
    run_id: str | None = None
    fault: str
    node: str | None = None
    detected: str | None = None


class NodeIncidents(StrictModel):
    node: str
    incidents: int
    in_window: int = Field(description="Incidents within the drain window before now.")
    faults: list[str]
    flagged: bool = Field(description="In-window incidents reached the drain threshold.")


class IncidentList(StrictModel):
    run: str | None = None
    node: str | None = None
    threshold: int
    window_seconds: float
    incidents: list[IncidentRow]
    nodes: list[NodeIncidents]
