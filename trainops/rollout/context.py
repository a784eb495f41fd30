"""What every serving object builder needs: the rollout spec, names, labels, and the served releases."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops.errors import InputError
from trainops.manifest import Manifest
from trainops.manifest.serving import RolloutSpec
from trainops.render.names import MANAGED_BY

LABEL_TRACK = "trainops.dev/track"
LABEL_METRICS = "trainops.dev/metrics"
ANNOTATION_RELEASE = "trainops.dev/release"


@dataclass
class ServeContext:
    manifest: Manifest
    rollout: RolloutSpec
    warnings: list[str] = field(default_factory=list)

    @property
    def pipeline(self) -> str:
        return self.manifest.pipeline.metadata.name

    @property
    def name(self) -> str:
        """Base name of every serving object (a DNS-1035 label: Services are named after it)."""
        name = self.pipeline
        return name if name[0].isalpha() else f"m{name}"[:40]

    @property
    def namespace(self) -> str | None:
        return self.rollout.namespace

    @property
    def insecure(self) -> frozenset[str]:
        return frozenset(self.manifest.pipeline.spec.insecure_registries)

    def labels(self, track: str | None = None) -> dict[str, str]:
        labels = dict(self.manifest.pipeline.metadata.labels)
        labels.update(
            {
                "app.kubernetes.io/name": self.name,
                "app.kubernetes.io/component": "serve",
                "app.kubernetes.io/managed-by": MANAGED_BY,
                "trainops.dev/pipeline": self.pipeline,
            }
        )
        if track is not None:
            labels[LABEL_TRACK] = track
        return labels

    def selector(self, track: str | None = None) -> dict[str, str]:
        out = {"app.kubernetes.io/name": self.name, "app.kubernetes.io/component": "serve"}
        if track is not None:
            out[LABEL_TRACK] = track
        return out

    def metadata(
        self, name: str, *, track: str | None = None, labels: dict[str, str] | None = None
    ) -> dict[str, object]:
        meta: dict[str, object] = {"name": name}
        if self.namespace:
            meta["namespace"] = self.namespace
        meta["labels"] = {**self.labels(track), **(labels or {})}
        return meta

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


def serve_context(manifest: Manifest) -> ServeContext:
    rollout = manifest.pipeline.spec.rollout
    if rollout is None:
        raise InputError(
            f"{manifest.path.name} has no rollout section", hint="add spec.rollout (engine, traffic, canary)"
        )
    return ServeContext(manifest, rollout)
