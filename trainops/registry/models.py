"""The pydantic model of the config blob, for its JSON Schema (registry/schema/config.v1.json,
made by trainops.registry.schema). The blob itself is written from plain data by
trainops.registry.artifact.config_blob; its lineage is trainops.registry.lineage_data.Lineage."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema

from trainops.errors import InputError
from trainops.registry import media
from trainops.registry.lineage_data import Lineage


def _lineage(value: Any) -> Lineage:
    if isinstance(value, Lineage):
        return value
    try:
        return Lineage.from_json(value)
    except InputError as e:
        raise ValueError(str(e)) from None


LineageField = Annotated[
    Lineage,
    PlainValidator(_lineage),
    PlainSerializer(Lineage.as_json),
    WithJsonSchema({"type": "object"}),  # registry.schema puts lineage_data.JSON_SCHEMA_DEFS in its place
]


class ArtifactConfig(BaseModel):
    """The config blob of trainops kinds (application/vnd.trainops.config.v1+json)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    schema_version: Literal[1] = Field(1, alias="schemaVersion")
    kind: media.Kind
    created: str = Field(description="RFC 3339 UTC time the content was made.")
    lineage: LineageField = Field(default_factory=Lineage)
