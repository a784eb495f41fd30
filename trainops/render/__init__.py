"""Scheduler targets built as data, serialized to YAML, and checked against upstream CRDs.

render_train(manifest, image=…, run_id=…)   the training job (Volcano, Kueue, PyTorchJob, Slurm)
render_tenants(manifest)                    spec.tenants as Volcano or Kueue queues
render_all(manifest, image=…, run_id=…)     both, patched
validate_objects(objects)                   strict schema problems of rendered objects
check_render(manifest)                      render with a placeholder image and validate
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.lazy import lazy_exports

if TYPE_CHECKING:
    from trainops.render.api import check_render, render_all, render_tenants, render_train
    from trainops.render.model import RenderCheck, Rendered, RenderedFile, SchemaProblem
    from trainops.render.validate import validate_objects

__getattr__ = lazy_exports(
    __name__,
    {
        "trainops.render.api": (
            "check_render",
            "render_all",
            "render_tenants",
            "render_train",
        ),
        "trainops.render.model": (
            "RenderCheck",
            "Rendered",
            "RenderedFile",
            "SchemaProblem",
        ),
        "trainops.render.validate": ("validate_objects",),
    },
)

__all__ = [
    "RenderCheck",
    "Rendered",
    "RenderedFile",
    "SchemaProblem",
    "check_render",
    "render_all",
    "render_tenants",
    "render_train",
    "validate_objects",
]
