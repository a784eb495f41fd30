"""The Argo CD Application that syncs one GitOps path of a pipeline (spec.gitops.argocd).

trainops writes three paths per pipeline and environment — the training job and its queues
(`<gitops.path>`), the eval Job (`<gitops.path>-eval`), the serving objects
(`<gitops.path>-serve`) — and renders one Application for each, into `argocd/application.yaml`
of the path itself. Argo CD reads only the path's own objects: `*.yaml` at its top (serving,
eval) or, for the training path whose queues sit in subdirectories, every directory but
`argocd/` — so an Application never applies itself. A user applies each once (or an
app-of-apps does); from then on git alone drives the cluster.

Automated sync with prune and self-heal as spec.gitops.argocd says (a cancelled training job
is a commit that removes it: prune deletes it); `CreateNamespace=true`, since the objects
name their namespace; the training path's sync is retried (its Job waits for its Queue).
"""

from __future__ import annotations

from typing import Any

from trainops.manifest import Manifest
from trainops.render.names import common_labels

APPLICATION_FILE = "argocd/application.yaml"
# a failed sync of the training path is retried (Argo CD's backoff: 5 s, doubling, up to 1 min)
_RETRY = {"limit": 5, "backoff": {"duration": "5s", "factor": 2, "maxDuration": "1m"}}


def repo_url(manifest: Manifest, warnings: list[str]) -> str:
    url = manifest.pipeline.spec.gitops.repo
    if url.startswith("file://") or ("://" not in url and not url.startswith("git@")):
        note = f"spec.gitops.repo {url} is a local path: Argo CD in a cluster cannot read it"
        if note not in warnings:
            warnings.append(note)
    return url


def gitops_labels(manifest: Manifest) -> dict[str, str]:
    """The labels of an Application that syncs a path of the pipeline (not of a run)."""

    pipeline = manifest.pipeline
    return common_labels(pipeline.metadata.name, run_id=None, component="gitops", extra=dict(pipeline.metadata.labels))


def application(
    manifest: Manifest,
    *,
    role: str,
    path: str,
    namespace: str | None,
    warnings: list[str],
    labels: dict[str, str] | None = None,
    recurse: bool = False,
    ignore: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The Application of `path` (role: train, eval or serve); None without spec.gitops.argocd.
    Its labels: `labels`, else the pipeline's with component `gitops` (gitops_labels).

    `ignore`: ignoreDifferences for fields a controller owns; they are also kept on sync
    (RespectIgnoreDifferences), or every sync would write git's value over the controller's,
    and a sync applies only what is out of sync (ApplyOutOfSyncOnly): RespectIgnoreDifferences
    fills the ignored fields from Argo CD's cache of the live object, so re-applying an object
    that is in sync raced the controller — seen on the simulated cluster, where the sync of
    `rollout start` wrote the HTTPRoute's rules back a moment after Argo Rollouts had added
    the header route."""
    spec = manifest.pipeline.spec
    argocd = spec.gitops.argocd
    if argocd is None:
        return None
    env = manifest.env or "default"
    labels = labels if labels is not None else gitops_labels(manifest)
    destination: dict[str, Any] = {"server": argocd.destination_server}
    namespace = namespace or argocd.destination_namespace
    if namespace:
        destination["namespace"] = namespace
    directory: dict[str, Any] = {"recurse": True, "exclude": "argocd/*"} if recurse else {"include": "*.yaml"}
    app_spec: dict[str, Any] = {
        "project": argocd.project,
        "source": {
            "repoURL": repo_url(manifest, warnings),
            "targetRevision": spec.gitops.branch,
            "path": path,
            "directory": directory,
        },
        "destination": destination,
    }
    sync: dict[str, Any] = {}
    if argocd.automated:
        sync["automated"] = {"prune": argocd.prune, "selfHeal": argocd.self_heal}
    sync["syncOptions"] = ["CreateNamespace=true"]
    if role == "train":
        # the job and its tenants' queues go in one sync: Volcano's admission webhook refuses
        # a Job until its new Queue exists and Volcano's controller has opened it (a moment
        # later), and an automated sync that failed is not tried again for the same commit
        sync["retry"] = dict(_RETRY)
    app_spec["syncPolicy"] = sync
    if ignore:
        app_spec["ignoreDifferences"] = ignore
        sync["syncOptions"] += ["RespectIgnoreDifferences=true", "ApplyOutOfSyncOnly=true"]
    name = manifest.pipeline.metadata.name
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": f"{name}-{role}-{env}"[:253], "namespace": argocd.namespace, "labels": labels},
        "spec": app_spec,
    }
