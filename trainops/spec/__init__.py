"""The trainops.yaml contract: pydantic models, safe YAML loading, overlays, JSON Schema."""

from trainops.spec.load import DEFAULT_MANIFEST, CheckReport, Manifest, check_manifest, load_manifest
from trainops.spec.pipeline import Pipeline, PipelineSpec

__all__ = [
    "DEFAULT_MANIFEST",
    "CheckReport",
    "Manifest",
    "Pipeline",
    "PipelineSpec",
    "check_manifest",
    "load_manifest",
]
