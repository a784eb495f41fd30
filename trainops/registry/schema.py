"""JSON Schema of the trainops config blob (registry/schema/config.v1.json is generated from it)."""

from __future__ import annotations

from typing import Any

from trainops.registry import media
from trainops.registry.artifact import ArtifactConfig
from trainops.registry.lineage_data import JSON_SCHEMA_DEFS

SCHEMA_ID = "https://trainops.dev/schemas/config.v1.json"


def config_json_schema() -> dict[str, Any]:
    schema = ArtifactConfig.model_json_schema(by_alias=True, mode="serialization")
    schema["$defs"] = {**schema.get("$defs", {}), **JSON_SCHEMA_DEFS}  # lineage is plain data, its schema written out
    schema["properties"]["lineage"] = {"$ref": "#/$defs/Lineage"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"trainops artifact config ({media.CONFIG})",
        **{k: v for k, v in schema.items() if k != "title"},
    }
