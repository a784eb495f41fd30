"""The JSON Schema of trainops.yaml, for editors' YAML language servers and CI checks."""

from __future__ import annotations

import json
from typing import Any

from trainops import __version__
from trainops.manifest.pipeline import API_VERSION, Pipeline

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


def _type_of(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].rsplit('/', 1)[-1]}](#{prop['$ref'].rsplit('/', 1)[-1].lower()})"
    if "anyOf" in prop:
        kinds = [_type_of(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type_of(prop['additionalProperties'])}"
    return str(kind)


def _default_of(name: str, prop: dict[str, Any], required: list[str]) -> str:
    if name in required:
        return "**required**"
    if "default" in prop:
        value = prop["default"]
        return "" if value in (None, [], {}) else f"`{json.dumps(value)}`"
    return ""


def schema_table(title: str, model: dict[str, Any]) -> list[str]:
    """One model of a JSON Schema as a Markdown table (its fields: type, default, description)."""
    lines = [f"## {title}", ""]
    if model.get("description"):
        lines += [model["description"], ""]
    lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    required = model.get("required", [])
    for name, prop in model.get("properties", {}).items():
        text = (prop.get("description") or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {_type_of(prop)} | {_default_of(name, prop, required)} | {text} |")
    return [*lines, ""]


def manifest_reference_markdown() -> str:
    """docs/reference/manifest.md: every model of the schema as a table (generated; a test keeps it current)."""
    schema = pipeline_json_schema()
    lines = [
        "# trainops.yaml reference",
        "",
        f"Generated from the models in `trainops/manifest/` (`{API_VERSION}`); do not edit by hand —",
        "regenerate with `python scripts/gen_docs.py`. `trainops schema` prints the same as",
        "JSON Schema, for editors. Keys are camelCase; unknown keys are errors.",
        "",
        *schema_table("Pipeline", schema),
    ]
    for name, model in sorted(schema.get("$defs", {}).items()):
        if model.get("type") == "object":
            lines += schema_table(name, model)
    return "\n".join(lines).rstrip() + "\n"
