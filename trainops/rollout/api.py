"""render_rollout: the serving tree of one release as stable, checked strictly, as text or on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainops.errors import InputError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.render.directory import write_rendered
from trainops.rollout.context import serve_context
from trainops.rollout.render import build_tree, check_tree
from trainops.rollout.resolve import resolve_image, resolve_release
from trainops.rollout.state import RolloutState, Served


@dataclass(frozen=True)
class RolloutRender:
    path: str  # the directory in the GitOps repo
    release: str
    image: str
    files: dict[str, str]
    directory: str | None = None  # where the files were written, if anywhere
    warnings: list[str] = field(default_factory=list)

    def text(self) -> str:
        parts = [
            f"# file: {name}\n{body if body.endswith(chr(10)) else body + chr(10)}" for name, body in self.files.items()
        ]
        return "---\n".join(parts)


def render_rollout(
    manifest: Manifest,
    *,
    release: str | None = None,
    image: str | None = None,
    out: Path | None = None,
    insecure: bool = False,
) -> RolloutRender:
    """The serving objects of `release` (else rollout.model) served as stable, every one checked."""

    ctx = serve_context(manifest)
    text = release or ctx.rollout.model
    if not text:
        raise InputError(
            "rollout render has no release to serve",
            hint="pass RELEASE (REPOSITORY:TAG or …@sha256:…) or set rollout.model",
        )
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        served = Served(resolve_release(registries, text), resolve_image(manifest, registries, image=image))
    tree = build_tree(ctx, RolloutState(stable=served))
    problems = check_tree(tree)
    if problems:
        raise InputError(f"rendered serving object is invalid: {problems[0]}", hint="fix spec.rollout")
    directory = None
    if out is not None:
        write_rendered(out, tree.files, marker=f"rollout\nrelease {served.release}\n")
        directory = str(out.resolve())
    return RolloutRender(tree.path, served.release, served.image, tree.contents(), directory, tree.warnings)
