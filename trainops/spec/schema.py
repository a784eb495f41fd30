"""The JSON Schema of trainops.yaml, for editors' YAML language servers and CI checks."""

from __future__ import annotations

from typing import Any

from trainops import __version__
from trainops.spec.pipeline import API_VERSION, Pipeline

SCHEMA_ID = "https://trainops.dev/schemas/v1alpha1/pipeline.json"


def pipeline_json_schema() -> dict[str, Any]:
    """The schema of a Pipeline document as YAML writes it (camelCase keys)."""
    schema = Pipeline.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"trainops Pipeline ({API_VERSION})",
        "description": f"trainops.yaml, as trainops {__version__} validates it.",
        **{k: v for k, v in schema.items() if k != "title"},
    }
