"""The trainops.yaml contract: pydantic models, safe YAML loading, overlays, JSON Schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.manifest.load import DEFAULT_MANIFEST, CheckReport, Manifest, check_manifest, load_manifest
    from trainops.manifest.pipeline import Pipeline, PipelineSpec

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.manifest.load": (
            "DEFAULT_MANIFEST",
            "CheckReport",
            "Manifest",
            "check_manifest",
            "load_manifest",
        ),
        "trainops.manifest.pipeline": (
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
