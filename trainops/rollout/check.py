"""check_serving: what spec.rollout implies, rendered and checked strictly before any release.

`trainops validate --render` calls it for the base spec and each environment. There is no
release or serving image yet, so pinned placeholders stand in (as placeholder_image does for
the training targets): the point is that every serving object the manifest implies is valid
against its CRD or core schema. Both states are rendered: one release served as stable, and
a canary at its first step beside it (objects such as the canary Deployment exist only then).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from trainops.cluster.dryrun import Sent
from trainops.errors import TrainopsError
from trainops.manifest import Manifest
from trainops.render.api import PLACEHOLDER_DIGEST, SERVING_KINDS, TRAIN_KINDS, placeholder_image
from trainops.render.model import RenderCheck, SchemaProblem
from trainops.render.validate import validate_objects
from trainops.rollout.context import serve_context
from trainops.rollout.render import build_tree
from trainops.rollout.state import RolloutState, Served

CANARY_DIGEST = "sha256:" + "0" * 63 + "1"


def placeholder_served(manifest: Manifest, digest: str = PLACEHOLDER_DIGEST) -> Served:
    """A release and a serving image that stand in for real ones, both pinned by digest."""
    engine = manifest.pipeline.spec.rollout.engine if manifest.pipeline.spec.rollout is not None else "vllm"
    release = "oci://" + placeholder_image(manifest, image="model:placeholder", digest=digest)
    return Served(release, placeholder_image(manifest, image=f"serve-{engine}"))


def check_serving(manifest: Manifest, *, crds_dir: Path | None = None) -> RenderCheck | None:
    """The serving objects of spec.rollout checked strictly; None when the manifest has no rollout."""
    rollout = manifest.pipeline.spec.rollout
    if rollout is None:
        return None
    label = f"serving ({rollout.engine}, {rollout.traffic})"
    states = [
        RolloutState(stable=placeholder_served(manifest)),
        RolloutState(stable=placeholder_served(manifest), canary=placeholder_served(manifest, CANARY_DIGEST), step=0),
    ]
    problems: list[SchemaProblem] = []
    warnings: list[str] = []
    counts: Counter[str] = Counter()
    files: list[str] = []
    rendered: list[dict[str, Any]] = []
    for state in states:
        try:
            tree = build_tree(serve_context(manifest), state)
        except TrainopsError as err:
            problem = SchemaProblem(manifest.path.name, "", "", "", f"spec.rollout: {err}")
            return RenderCheck(manifest.env, label, [], {}, [problem], warnings)
        for problem in validate_objects(tree.objects, crds_dir=crds_dir, sources=tree.sources):
            if str(problem) not in {str(p) for p in problems}:
                problems.append(problem)
        warnings.extend(w for w in tree.warnings if w not in warnings)
        counts = Counter(f"{obj.get('apiVersion')} {obj.get('kind')}" for obj in tree.objects)  # the canary's
        rendered.extend(tree.objects)
        files = sorted({*files, *(f"{tree.path}/{item.path}" for item in tree.files)})
    problems.extend(_unmatched_patches(manifest, rendered))
    return RenderCheck(manifest.env, label, files, dict(sorted(counts.items())), problems, warnings)


def _unmatched_patches(manifest: Manifest, objects: list[dict[str, Any]]) -> list[SchemaProblem]:
    """spec.patches of a serving kind that match no serving object (the training render leaves
    those to this check, unless its scheduler renders that kind too)."""
    train = manifest.pipeline.spec.train
    trained = TRAIN_KINDS.get(train.scheduler, frozenset()) if train is not None else frozenset()
    kinds = sorted({str(obj.get("kind")) for obj in objects})
    out = []
    for index, patch in enumerate(manifest.pipeline.spec.patches):
        target = patch.target
        if target.kind not in SERVING_KINDS or target.kind in trained:
            continue
        names = {obj.get("metadata", {}).get("name") for obj in objects if obj.get("kind") == target.kind}
        if not names or (target.name is not None and target.name not in names):
            named = f" named {target.name}" if target.name else ""
            message = f"spec.patches[{index}]: no rendered {target.kind}{named} to patch"
            out.append(SchemaProblem(manifest.path.name, "", "", "", f"{message}; serving renders {', '.join(kinds)}"))
    return out


def serving_sent(manifest: Manifest) -> list[Sent]:
    """The serving objects of a placeholder release, stable and as a canary, each with the file
    and manifest field it comes from (what a cluster dry run sends)."""

    stable = placeholder_served(manifest)
    states = [
        RolloutState(stable=stable),
        RolloutState(stable=stable, canary=placeholder_served(manifest, CANARY_DIGEST), step=0),
    ]
    out: dict[tuple[str, str, str], Sent] = {}
    for state in states:
        tree = build_tree(serve_context(manifest), state)
        for obj, source in zip(tree.objects, tree.sources, strict=True):
            meta = obj.get("metadata") or {}
            key = (str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
            out[key] = Sent(obj, f"{tree.path}/{source}", ("spec", "rollout"))
    return list(out.values())
