"""What the GitOps repository serves is never deleted: the guard of every deleting path.

A release the GitOps repository serves (as stable or as the canary) is what pods pull at
their next restart; removing it, or what it needs (its eval report, signatures,
provenance, the checkpoint it came from), breaks serving or its evidence. The manifest's
GitOps repository is read (the branch tip's rollout state) before anything is removed;
trainops.registry.retention.keep decides with it, for `registry rm` (refused, exit 5, naming the
commit) and `registry gc` (kept, and said why). Other releases go by the registry's own
rule (`--force --reason`).
"""

from __future__ import annotations

from trainops.errors import ExistsError
from trainops.manifest import Manifest
from trainops.registry.context import Registries
from trainops.registry.lineage import scan_registry
from trainops.registry.reference import Reference
from trainops.registry.retention.gc import DEFAULT_GRACE, GcResult, collect
from trainops.registry.retention.keep import SERVED_HINT, Graph, Guard, Served, needed
from trainops.registry.retention.protect import Override
from trainops.registry.retention.removal import RemoveResult, remove
from trainops.registry.store import resolve


def served_releases(registries: Registries, manifest: Manifest | None) -> Served:
    """The releases the manifest's GitOps repository serves (none without a manifest or a rollout)."""
    if manifest is None or manifest.pipeline.spec.rollout is None:
        return Served()
    from trainops.rollout.flows import gitops_repo, read_state  # lazy: loads ssl, socketserver

    state, commit = read_state(manifest)
    if commit is None:
        return Served()
    path = gitops_repo(manifest).path
    releases: dict[tuple[str, str], str] = {}
    for role, served in (("stable", state.stable), ("canary", state.canary)):
        if served is not None:
            pinned = registries.ref(served.release)
            if pinned.digest is not None:
                releases[(pinned.repo_url, pinned.digest)] = (
                    f"served as {role} by the GitOps repo (commit {commit[:12]} in {path})"
                )
    return Served(releases)


def guard_for(registries: Registries, manifest: Manifest | None, override: Override | None) -> Guard:
    return Guard(served_releases(registries, manifest), override)


def remove_unless_served(
    registries: Registries, *, ref: Reference, manifest: Manifest | None, override: Override | None
) -> RemoveResult:
    """Remove ref (a tag, or a manifest by digest) unless the manifest's GitOps repository
    serves it or a served release needs it; a release otherwise needs an override."""
    guard = guard_for(registries, manifest, override)
    if guard.served.releases and (ref.tag or ref.digest):
        digest = resolve(registries, ref=ref).parsed.digest
        _refuse_if_needed(registries, guard, ref, digest)
    return remove(registries, ref=ref, guard=guard)


def _refuse_if_needed(registries: Registries, guard: Guard, ref: Reference, digest: str) -> None:
    """What a served release needs (its eval report, referrers, parents) is refused like it."""
    roots = dict(guard.served.releases)
    if (ref.repo_url, digest) in roots:
        return  # the release itself: the guard refuses it, naming the commit
    served = registries.ref(sorted(roots)[0][0])
    root = registries.root() if registries.default_registry else served.root
    why = needed(Graph.of(scan_registry(registries, root)), roots).get((ref.repo_url, digest))
    if why is not None:
        raise ExistsError(f"{ref} is {why}; it cannot be removed", hint=SERVED_HINT)


def collect_unless_served(
    registries: Registries,
    url: str | None,
    manifest: Manifest | None,
    *,
    override: Override | None,
    keep_last: int | None = None,
    dry_run: bool = False,
    grace: float = DEFAULT_GRACE,
) -> GcResult:
    """`registry gc` with the guard: what the GitOps repo serves, releases (without an
    override) and what they need stay, whatever keep_last says."""
    guard = guard_for(registries, manifest, override)
    root = registries.root(url)
    return collect(registries, root=root, keep_last=keep_last, dry_run=dry_run, grace=grace, guard=guard)
