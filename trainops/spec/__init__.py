"""The trainops.yaml contract: pydantic models, safe YAML loading, overlays, JSON Schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.spec.load import DEFAULT_MANIFEST, CheckReport, Manifest, check_manifest, load_manifest
    from trainops.spec.pipeline import Pipeline, PipelineSpec

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.spec.load": (
            "DEFAULT_MANIFEST",
            "CheckReport",
            "Manifest",
            "check_manifest",
            "load_manifest",
        ),
        "trainops.spec.pipeline": (
            "Pipeline",
            "PipelineSpec",
        ),
    },
)

__all__ = [
    "DEFAULT_MANIFEST",
    "CheckReport",
    "Manifest",
    "Pipeline",
    "PipelineSpec",
    "check_manifest",
    "load_manifest",
]
