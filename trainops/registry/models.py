"""The pydantic models of lineage and the config blob (re-exported by trainops.registry.artifact,
which loads them on first use so that commands that need no validation skip pydantic)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trainops.registry import media
from trainops.registry.plain_lineage import COMMIT_PATTERN, DIGEST_PATTERN, PlainLineage, PlainParent, Relation


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Parent(_Model):
    """An artifact this one came from."""

    digest: str = Field(pattern=DIGEST_PATTERN)
    ref: str = Field(description="Where the parent lives (repository URL, with tag if it had one).")
    relation: Relation = "parent"


class Environment(_Model):
    """The interpreter a run ran in when no image was built (a local run): recorded instead
    of an image digest, never passed off as one."""

    python: str = Field(description="Python version, such as 3.11.2.")
    implementation: str = Field(description="cpython, pypy, …")
    platform: str = Field(description="sys.platform and machine, such as linux-x86_64.")
    packages: int = Field(ge=0, description="How many distributions were installed.")
    digest: str = Field(
        pattern=DIGEST_PATTERN,
        description="sha256 of canonical JSON of the above and every installed name==version.",
    )


class Forced(_Model):
    """A gate someone overrode: the reason they gave and who they are."""

    reason: str = Field(min_length=1)
    by: str = Field(min_length=1, description="git user.name <user.email>, else $USER.")


class Lineage(_Model):
    """What an artifact came from: code, image, run, data and parent artifacts."""

    pipeline: str | None = None
    git_commit: str | None = Field(None, alias="gitCommit", pattern=COMMIT_PATTERN)
    git_repo: str | None = Field(None, alias="gitRepo")
    image_digest: str | None = Field(None, alias="imageDigest", pattern=DIGEST_PATTERN)
    environment: Environment | None = Field(None, description="Where a run without an image ran.")
    run_id: str | None = Field(None, alias="runId")
    step: int | None = Field(None, ge=0)
    metrics: dict[str, float] = Field(default_factory=dict)
    parents: list[Parent] = Field(default_factory=list)
    forced: Forced | None = Field(None, description="A release made without a passing eval: why, and by whom.")

    def plain(self) -> PlainLineage:
        """The same lineage as the pydantic-free PlainLineage."""
        return PlainLineage(
            pipeline=self.pipeline,
            git_commit=self.git_commit,
            git_repo=self.git_repo,
            image_digest=self.image_digest,
            environment=self.environment.model_dump() if self.environment is not None else None,
            run_id=self.run_id,
            step=self.step,
            metrics=dict(self.metrics),
            parents=tuple(PlainParent(p.digest, p.ref, p.relation) for p in self.parents),
            forced=self.forced.model_dump() if self.forced is not None else None,
        )


class ArtifactConfig(_Model):
    """The config blob of trainops kinds (application/vnd.trainops.config.v1+json)."""

    schema_version: Literal[1] = Field(1, alias="schemaVersion")
    kind: media.Kind
    created: str = Field(description="RFC 3339 UTC time the content was made.")
    lineage: Lineage = Field(default_factory=Lineage)
