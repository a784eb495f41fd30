"""Rollout actions as GitOps commits: start, promote, abort, rollback; status and history.

The GitOps repo is the only state. Each action reads the state file at the branch tip,
computes the next state, renders its serving tree, checks every object strictly, and
writes the tree in one commit with the trailers Trainops-Pipeline, Trainops-Release,
Trainops-Rollout-Step and Trainops-Action, pushed with write_tree's fetch-reapply-retry.
On a retry the state at the new tip must still be the one the action was computed from;
if another operator moved it first (two promotes of the same step), this action becomes a
no-op (`stale`), never a second step or a lost commit.

A rollback writes back, byte for byte, the tree of the newest commit that served the
release as stable, so the cluster gets exactly what served it before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from trainops.cluster.access import DEFAULT_KUBECONFIG, ClusterAccess
from trainops.errors import ExistsError, InputError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.rollout.context import ServeContext, serve_context
from trainops.rollout.live import check_promotable, read_live
from trainops.rollout.render import build_tree, check_tree, serving_path
from trainops.rollout.resolve import newest_release, resolve_image, resolve_release
from trainops.rollout.state import STATE_FILE, RolloutState, Served, parse_state
from trainops.serialize import HIDDEN

TRAILER_PIPELINE = "Trainops-Pipeline"
TRAILER_RELEASE = "Trainops-Release"
TRAILER_STEP = "Trainops-Rollout-Step"
TRAILER_ACTION = "Trainops-Action"
TRAILER_STABLE = "Trainops-Stable"  # during a canary: the release still serving the rest
STABLE_STEP = "stable"


@dataclass(frozen=True)
class ActionResult:
    """What one rollout action committed (or why it committed nothing)."""

    action: str
    commit: str | None
    changed: bool
    stale: bool  # another writer changed the rollout first: nothing was committed
    before: RolloutState = field(metadata=HIDDEN)
    after: RolloutState = field(metadata=HIDDEN)
    weight: int  # percent of traffic on the canary after the action
    step: str  # the Trainops-Rollout-Step trailer
    path: str
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    analysis: list[str] = field(default_factory=list)  # measured values, when analysis ran
    data_properties: ClassVar[tuple[str, ...]] = ("stable", "canary")

    @property
    def stable(self) -> Served | None:
        """What serves the rest of the traffic after the action."""
        return self.after.stable

    @property
    def canary(self) -> Served | None:
        """The canary after the action, if one is in progress."""
        return self.after.canary


@dataclass(frozen=True)
class Repo:
    url: str
    branch: str
    path: str
    create: bool


def gitops_repo(manifest: Manifest) -> Repo:
    from trainops.gitops.target import gitops_url  # lazy: loads subprocess

    url, create = gitops_url(manifest)
    return Repo(url, manifest.pipeline.spec.gitops.branch, serving_path(manifest), create)


def read_state(manifest: Manifest) -> tuple[RolloutState, str | None]:
    """The state at the branch tip, and the tip's commit (None: nothing committed yet)."""
    from trainops.gitops import read_tree  # lazy: loads subprocess
    from trainops.gitops.remote import parse_remote  # lazy: loads subprocess

    repo = gitops_repo(manifest)
    local = parse_remote(repo.url).local
    if local is not None and (not local.exists() or not any(local.iterdir())):
        return RolloutState(), None
    snapshot = read_tree(repo=repo.url, branch=repo.branch, path=repo.path)
    return parse_state(snapshot.files.get(STATE_FILE)), snapshot.commit


def weight_of(ctx: ServeContext, state: RolloutState) -> int:
    if state.canary is None:
        return 0
    if state.stable is None or state.step is None or ctx.rollout.canary is None:
        return 100
    steps = ctx.rollout.canary.steps
    return steps[state.step].weight if state.step < len(steps) else 100


def step_label(ctx: ServeContext, state: RolloutState) -> str:
    if state.canary is None or state.step is None:
        return STABLE_STEP
    total = len(ctx.rollout.canary.steps) if ctx.rollout.canary else 1
    return f"{state.step + 1}/{total} {weight_of(ctx, state)}%"


def _summary(ctx: ServeContext, action: str, state: RolloutState) -> str:
    name = ctx.pipeline
    if state.canary is not None:
        stable = state.stable.version if state.stable else "none"
        return f"rollout {name}: {action}: canary {state.canary.version} at {weight_of(ctx, state)}%, stable {stable}"
    served = state.stable.version if state.stable else "nothing"
    return f"rollout {name}: {action}: {served} serves 100%"


def commit_files(
    manifest: Manifest,
    ctx: ServeContext,
    *,
    action: str,
    before: RolloutState,
    after: RolloutState,
    files: Mapping[str, str | bytes],
    body: list[str] | None = None,
    max_attempts: int = 5,
) -> ActionResult:
    """Commit `files` as the serving tree of `after`, if the tip still holds `before`."""
    from trainops.gitops import write_tree  # lazy: loads subprocess

    repo = gitops_repo(manifest)
    served = after.canary or after.stable
    trailers = {TRAILER_PIPELINE: ctx.pipeline, TRAILER_ACTION: action, TRAILER_STEP: step_label(ctx, after)}
    if served is not None:
        trailers[TRAILER_RELEASE] = served.release
    if after.canary is not None and after.stable is not None:
        trailers[TRAILER_STABLE] = after.stable.release
    message = _summary(ctx, action, after) + ("\n\n" + "\n".join(body) if body else "")
    result = write_tree(
        repo=repo.url,
        branch=repo.branch,
        path=repo.path,
        files=files,
        message=message,
        trailers=trailers,
        create=repo.create,
        max_attempts=max_attempts,
        guard=lambda tip: parse_state(tip.get(STATE_FILE)) == before,
    )
    return ActionResult(
        action=action,
        commit=result.commit,
        changed=result.changed,
        stale=result.stale,
        before=before,
        after=before if result.stale else after,
        weight=weight_of(ctx, before if result.stale else after),
        step=step_label(ctx, before if result.stale else after),
        path=repo.path,
        files=result.files,
        warnings=list(ctx.warnings),
    )


def commit_state(
    manifest: Manifest,
    ctx: ServeContext,
    *,
    action: str,
    before: RolloutState,
    after: RolloutState,
    body: list[str] | None = None,
    max_attempts: int = 5,
) -> ActionResult:
    """Render `after`, check every object strictly, and commit it (nothing on any problem)."""
    tree = build_tree(ctx, after)
    problems = check_tree(tree)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"rendered serving object is invalid: {problems[0]}{more}", hint="fix spec.rollout")
    return commit_files(
        manifest,
        ctx,
        action=action,
        before=before,
        after=after,
        files=tree.contents(),
        body=body,
        max_attempts=max_attempts,
    )


def start_rollout(
    manifest: Manifest,
    *,
    release: str | None,
    image: str | None = None,
    insecure: bool = False,
    body: list[str] | None = None,
    max_attempts: int = 5,
) -> ActionResult:
    """Commit the first canary step of `release` (stable: the release served now); None:
    the newest release of release.repository. body: lines for the commit message.

    With nothing served yet, or no canary steps, the release becomes stable at once.
    """

    ctx = serve_context(manifest)
    with Registries.for_manifest(manifest, insecure=insecure) as registries:
        pinned = resolve_release(registries, release) if release is not None else newest_release(manifest, registries)
        signing = manifest.pipeline.spec.release.signing if manifest.pipeline.spec.release else None
        if signing is not None and signing.required:
            from trainops.signing.verify import require_signed  # lazy: loads sqlite3

            require_signed(registries, release=pinned, spec=signing, root=manifest.root)
        served = Served(pinned, resolve_image(manifest, registries, image=image))
    before, _ = read_state(manifest)
    if before.canary is not None:
        raise ExistsError(
            f"a canary of {before.canary.version} is under way", hint="promote or abort it before starting another"
        )
    if before.stable is not None and before.stable.digest == served.digest:
        raise ExistsError(f"{served.version} is already the stable release", hint="nothing to start")
    if before.stable is None or ctx.rollout.canary is None:
        after = RolloutState(stable=served)
    else:
        after = RolloutState(stable=before.stable, canary=served, step=0)
    return commit_state(manifest, ctx, action="start", before=before, after=after, body=body, max_attempts=max_attempts)


def next_state(ctx: ServeContext, state: RolloutState, *, full: bool) -> RolloutState:
    if state.canary is None or state.step is None:
        raise ExistsError("no canary is under way: nothing to promote", hint="start one with `trainops rollout start`")
    steps = ctx.rollout.canary.steps if ctx.rollout.canary else []
    if full or state.step + 1 >= len(steps):
        return RolloutState(stable=state.canary)
    return RolloutState(stable=state.stable, canary=state.canary, step=state.step + 1)


def promote_check(manifest: Manifest, cluster: ClusterAccess | None) -> tuple[ClusterAccess | None, list[str]]:
    """The cluster `promote` reads before it commits, and a warning when it can read none.

    The one given (--cluster, --kubeconfig, --context); else, when the manifest declares Argo
    CD or Argo Rollouts (spec.gitops.argocd, rollout.traffic argo-rollouts), the user's own:
    $KUBECONFIG when set, else ~/.kube/config when it exists. A manifest that declares
    neither has no controller to ask."""
    if cluster is not None:
        return cluster, []
    spec = manifest.pipeline.spec
    if spec.gitops.argocd is None and (spec.rollout is None or spec.rollout.traffic != "argo-rollouts"):
        return None, []
    users_own = ClusterAccess.users_own()
    if users_own is not None:
        return users_own, []
    return None, [
        f"could not check the cluster (no --kubeconfig, $KUBECONFIG unset, no {DEFAULT_KUBECONFIG}): "
        "a canary Argo Rollouts aborted would not be seen, and this promote clears such an abort"
    ]


def promote(
    manifest: Manifest,
    *,
    full: bool = False,
    cluster: ClusterAccess | None = None,
    max_attempts: int = 5,
) -> ActionResult:
    """Advance the canary one step (with `full`, make it stable). Step by step while
    rollout.analysis holds is trainops.rollout.auto.auto_promote.

    The Rollout is read first from `cluster`, else from the user's kubeconfig when the
    manifest declares Argo CD or Argo Rollouts (promote_check): a canary Argo Rollouts
    aborted is not promoted (trainops.rollout.live.check_promotable). Without a kubeconfig the
    result warns that the cluster was not checked."""
    ctx = serve_context(manifest)
    before, _ = read_state(manifest)
    after = next_state(ctx, before, full=full)
    read, warnings = promote_check(manifest, cluster)
    if read is not None:
        check_promotable(read_live(manifest, read))
    action = "promote-full" if full else "promote"
    result = commit_state(manifest, ctx, action=action, before=before, after=after, max_attempts=max_attempts)
    result.warnings[:0] = warnings
    return result


def abort(manifest: Manifest, *, reason: list[str] | None = None, max_attempts: int = 5) -> ActionResult:
    """Return all traffic to stable: the canary's objects go, the stable tree is as before the start."""
    ctx = serve_context(manifest)
    before, _ = read_state(manifest)
    if before.canary is None:
        raise ExistsError("no canary is under way: nothing to abort")
    after = RolloutState(stable=before.stable or before.canary)
    return commit_state(
        manifest, ctx, action="abort", before=before, after=after, body=reason, max_attempts=max_attempts
    )
