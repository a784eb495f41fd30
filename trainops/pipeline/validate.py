"""`trainops validate`: the manifest and every environment overlay, and, when asked, what each
target would deploy (train objects and, with spec.rollout, the serving objects) checked
against the upstream CRDs, and against a cluster (server-side dry run, read-only). One
check, one result; the CLI prints it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from trainops.cluster.access import ClusterAccess
from trainops.errors import InputError, ManifestError, Problem
from trainops.render.model import RenderCheck, SchemaProblem

if TYPE_CHECKING:
    from trainops.cluster.dryrun import ClusterCheck


@dataclass(frozen=True)
class Validation:
    """What `validate` found: manifest problems, and the render checks when --render asked."""

    file: str
    environments: list[str]
    problems: list[Problem]
    render: list[RenderCheck] | None = None  # None: rendering was not asked for
    cluster: list[ClusterCheck] | None = None  # None: no cluster was asked
    data_properties: ClassVar[tuple[str, ...]] = ("ok",)

    @property
    def render_problems(self) -> list[SchemaProblem | Problem]:
        """What the CRDs and the cluster refused of the rendered objects."""
        rendered: list[SchemaProblem | Problem] = [p for check in self.render or () for p in check.problems]
        return rendered + [p for check in self.cluster or () for p in check.problems]

    @property
    def ok(self) -> bool:
        return not self.problems and not self.render_problems

    def raise_for_problems(self) -> None:
        """The manifest's problems as one ManifestError; the rendered objects' as one InputError."""
        if self.problems:
            raise ManifestError(self.problems)
        found = self.render_problems
        if len(found) == 1:
            raise InputError(str(found[0]))
        if found:
            raise InputError(
                f"{len(found)} problems in the rendered objects",
                hint="fix the manifest (or its spec.patches) and run `trainops validate --render` again",
            )


def validate(
    *,
    path: Path,
    env: str | None = None,
    render: bool = False,
    crds: Path | None = None,
    cluster: ClusterAccess | None = None,
) -> Validation:
    """Check the manifest (the base and each environment, or just `env`); with `render` (or
    `crds`, or a `cluster`) and a valid manifest, render each target and check its objects
    strictly; with `cluster`, also dry-run apply them there and check spec.cluster.topology."""
    from trainops.manifest import check_manifest  # lazy: loads pydantic

    report = check_manifest(path, env=env)
    targets: list[str | None] = [env] if env else [None, *report.environments]
    checks: list[RenderCheck] | None = None
    if render or crds is not None or cluster is not None:
        checks = _render_checks(path, env, targets, crds) if report.ok else []
    asked: list[ClusterCheck] | None = None
    if cluster is not None:
        asked = _cluster_checks(path, targets, cluster) if report.ok else []
    return Validation(str(path), list(report.environments), list(report.problems), checks, asked)


def _cluster_checks(path: Path, targets: list[str | None], cluster: ClusterAccess) -> list[ClusterCheck]:
    """Each target's objects (train, tenants, eval Job and serving) dry-run applied on the cluster."""
    from trainops.cluster.dryrun import Sent, check_against_cluster, rendered_objects  # lazy: loads pydantic
    from trainops.manifest import Manifest  # lazy: loads pydantic
    from trainops.rollout.check import serving_sent  # lazy: loads pydantic

    def everything(manifest: Manifest) -> list[Sent]:
        rollout = manifest.pipeline.spec.rollout is not None
        return rendered_objects(manifest) + (serving_sent(manifest) if rollout else [])

    return check_against_cluster(path, targets=targets, access=cluster, render=everything)


def _render_checks(path: Path, env: str | None, targets: list[str | None], crds: Path | None) -> list[RenderCheck]:
    """check_render (and check_serving, with spec.rollout) for the base spec and each environment (or just env)."""
    from trainops.manifest import load_manifest  # lazy: loads pydantic
    from trainops.render import check_render  # lazy: loads pydantic
    from trainops.rollout.check import check_serving  # lazy: loads pydantic

    checks = []
    for target in targets:
        manifest = load_manifest(path, env=target)
        serving = check_serving(manifest, crds_dir=crds)
        for check in [check_render(manifest, crds_dir=crds), *([serving] if serving else [])]:
            checks.append(_tag_env(check, target) if target and not env else check)
    return checks


def _tag_env(check: RenderCheck, env: str) -> RenderCheck:
    """Problems of an environment say so, as manifest problems do."""
    problems = [replace(p, message=f"{p.message} (with --env {env})") for p in check.problems]
    return replace(check, problems=problems)
