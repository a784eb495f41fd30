"""`registry rm` of what is being served: refused, whatever the flags.

A release the GitOps repository serves (as stable or as the canary) is what pods pull at
their next restart; removing it breaks serving. The manifest's GitOps repository is read
(the branch tip's rollout state) before anything is removed; a release served there is
refused with exit 5, naming the commit that serves it. Other releases go by the registry's
own rule (trainops.registry.protect: `--force --reason`).
"""

from __future__ import annotations

from trainops.errors import ExistsError
from trainops.registry import media
from trainops.registry.context import Registries
from trainops.registry.protect import Override
from trainops.registry.reference import Reference
from trainops.registry.removal import RemoveResult, remove
from trainops.registry.store import resolve
from trainops.spec import Manifest


def remove_unless_served(
    registries: Registries, *, ref: Reference, manifest: Manifest | None, override: Override | None
) -> RemoveResult:
    """Remove ref (a tag, or a manifest by digest) unless the manifest's GitOps repository
    serves it; a release otherwise needs an override."""
    if not ref.tag and not ref.digest:
        return remove(registries, ref=ref, override=override)  # refused: it names nothing to remove
    found = resolve(registries, ref=ref)
    served_here = manifest is not None and manifest.pipeline.spec.rollout is not None
    if served_here and manifest is not None and found.parsed.artifact_type == media.MODEL_ARTIFACT:
        _refuse_if_served(registries, manifest, found.ref)
    return remove(registries, ref=ref, override=override)


def _refuse_if_served(registries: Registries, manifest: Manifest, target: Reference) -> None:
    from trainops.serve.flows import gitops_repo, read_state

    state, commit = read_state(manifest)
    for role, served in (("stable", state.stable), ("canary", state.canary)):
        if served is None or commit is None:
            continue
        pinned = registries.ref(served.release)
        if pinned.repo_url == target.repo_url and pinned.digest == target.digest:
            repo = gitops_repo(manifest)
            raise ExistsError(
                f"{target.repo_url}:{served.version} is served as {role} by the GitOps repo "
                f"(commit {commit[:12]} in {repo.path}); it cannot be removed",
                hint="serve another release first (trainops rollout start/promote, or rollback), then remove it",
            )
