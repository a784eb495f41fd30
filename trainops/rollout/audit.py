"""Reading the rollout back from the GitOps repo: status, history, and the rollback it allows.

History comes from the commit trailers under the serving path (Trainops-Action,
Trainops-Release, Trainops-Rollout-Step), newest first. A rollback looks there for the
newest commit that left the release serving as stable (step `stable`), reads that
commit's serving tree and commits those bytes again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from trainops.cluster.access import ClusterAccess
from trainops.errors import ExistsError, InputError, NotFoundError
from trainops.manifest import Manifest
from trainops.rollout.context import serve_context
from trainops.rollout.flows import (
    STABLE_STEP,
    TRAILER_ACTION,
    TRAILER_PIPELINE,
    TRAILER_RELEASE,
    TRAILER_STABLE,
    TRAILER_STEP,
    ActionResult,
    commit_files,
    gitops_repo,
    read_state,
    step_label,
    weight_of,
)
from trainops.rollout.live import read_live
from trainops.rollout.state import STATE_FILE, RolloutState, Served, parse_state

if TYPE_CHECKING:
    from trainops.cluster.argo import LiveState


@dataclass(frozen=True)
class RolloutStatus:
    commit: str | None
    path: str
    stable: Served | None
    canary: Served | None
    weight: int
    step: str
    steps: int  # canary steps in the manifest
    live: LiveState | None = None  # what the cluster reports (with a kubeconfig)


@dataclass(frozen=True)
class HistoryItem:
    commit: str
    date: str
    action: str
    release: str | None
    step: str
    subject: str
    stable: str | None = None  # during a canary: the release serving the rest
    data_properties: ClassVar[tuple[str, ...]] = ("version",)

    @property
    def version(self) -> str:
        return Served(self.release, "").version if self.release and "@" in self.release else "-"


def rollout_status(manifest: Manifest, *, access: ClusterAccess | None = None) -> RolloutStatus:
    """What the branch tip of the GitOps repo serves; with a cluster to read (`access`), also
    what Argo CD and Argo Rollouts report (trainops.rollout.live)."""
    ctx = serve_context(manifest)
    state, commit = read_state(manifest)
    steps = len(ctx.rollout.canary.steps) if ctx.rollout.canary else 0
    return RolloutStatus(
        commit=commit,
        path=gitops_repo(manifest).path,
        stable=state.stable,
        canary=state.canary,
        weight=weight_of(ctx, state),
        step=step_label(ctx, state),
        steps=steps,
        live=_live(manifest, access) if access is not None else None,
    )


def _live(manifest: Manifest, access: ClusterAccess) -> LiveState:
    return read_live(manifest, access)


def rollout_history(manifest: Manifest, *, limit: int = 50) -> list[HistoryItem]:
    """The rollout commits of this pipeline under the serving path, newest first."""
    from trainops.gitops import history  # lazy: loads subprocess
    from trainops.gitops.remote import parse_remote  # lazy: loads subprocess

    repo = gitops_repo(manifest)
    local = parse_remote(repo.url).local
    if local is not None and (not local.exists() or not any(local.iterdir())):
        return []
    entries = history(repo=repo.url, branch=repo.branch, path=repo.path, limit=limit)
    name = manifest.pipeline.metadata.name
    return [
        HistoryItem(
            commit=e.commit,
            date=e.date,
            action=e.trailers.get(TRAILER_ACTION, "edit"),
            release=e.trailers.get(TRAILER_RELEASE),
            step=e.trailers.get(TRAILER_STEP, "-"),
            subject=e.subject,
            stable=e.trailers.get(TRAILER_STABLE),
        )
        for e in entries
        if e.trailers.get(TRAILER_PIPELINE, name) == name
    ]


@dataclass(frozen=True)
class Abandoned:
    """A release the GitOps history shows taken off: rolled back (from stable) or aborted
    (as the canary), and not served again since."""

    version: str
    action: str  # rollback | abort
    commit: str
    date: str

    def refusal(self) -> str:
        """Why `run`/`ci` leave it alone, and how to roll it out anyway."""
        done = "rolled back" if self.action == "rollback" else "aborted"
        return (
            f"{self.version} was {done} at GitOps commit {self.commit[:12]} ({self.date}): not rolled out again; "
            "pass --force --reason TEXT to roll it out anyway"
        )

    def forced(self, reason: str) -> str:
        """The line the new rollout commit carries: what it overrides, and why."""
        return f"Rolls out again {self.version}, taken off by {self.action} at {self.commit}: {reason}"


def abandoned(manifest: Manifest, *, release: str, limit: int = 500) -> Abandoned | None:
    """Whether the GitOps history shows `release` (pinned: …@sha256:…) rolled back or aborted
    with no commit serving it since. The release a rollback or abort took off is the one
    the commit before it served (its Trainops-Release: the canary, else the stable)."""
    digest = Served(release, "").digest
    items = rollout_history(manifest, limit=limit)
    for index, item in enumerate(items):  # newest first
        if _names(item.release, digest) or _names(item.stable, digest):
            return None  # served again since (started, promoted, rolled back to)
        if item.action not in ("rollback", "abort") or index + 1 >= len(items):
            continue
        before = items[index + 1]
        if before.release is not None and _names(before.release, digest):
            return Abandoned(before.version, item.action, item.commit, item.date)
    return None


def _names(release: str | None, digest: str) -> bool:
    return release is not None and "@" in release and Served(release, "").digest == digest


def _served_as_stable(items: list[HistoryItem], to: str | None, current: RolloutState) -> HistoryItem:
    stable_items = [i for i in items if i.step == STABLE_STEP and i.release and "@" in i.release]
    if to is None:
        now = current.stable.digest if current.stable else None
        for item in stable_items:
            if item.release and Served(item.release, "").digest != now:
                return item
        raise NotFoundError("no earlier release was served as stable: nothing to roll back to")
    for item in stable_items:
        if item.release and Served(item.release, "").matches(to):
            return item
    raise NotFoundError(
        f"{to} was never served as stable from this GitOps path",
        hint="`trainops rollout history` lists the releases served",
    )


def rollback(manifest: Manifest, *, to: str | None = None, limit: int = 500, max_attempts: int = 5) -> ActionResult:
    """Make an earlier release stable again (the one before the current stable, or `to`):
    a new commit whose serving tree is byte-identical to the one that served it before."""
    from trainops.gitops import read_tree  # lazy: loads subprocess

    ctx = serve_context(manifest)
    before, _ = read_state(manifest)
    if before.stable is None and before.canary is None:
        raise NotFoundError("nothing has been served from this GitOps path: nothing to roll back")
    target = _served_as_stable(rollout_history(manifest, limit=limit), to, before)
    repo = gitops_repo(manifest)
    snapshot = read_tree(repo=repo.url, branch=repo.branch, path=repo.path, commit=target.commit)
    after = parse_state(snapshot.files.get(STATE_FILE))
    if after.stable is None or after.canary is not None:
        raise InputError(f"commit {target.commit[:12]} does not hold a stable-only serving tree")
    if after == before:
        raise ExistsError(f"{after.stable.version} is already served as stable", hint="nothing to roll back")
    body = [f"Restores the serving tree of {target.commit} byte for byte."]
    return commit_files(
        manifest,
        ctx,
        action="rollback",
        before=before,
        after=after,
        files=snapshot.files,
        body=body,
        max_attempts=max_attempts,
    )
