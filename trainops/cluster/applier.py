"""STAND-IN FOR ARGO CD: apply the GitOps tree at a commit to a cluster, and prune what it removed.

trainops writes to clusters only through git; a GitOps controller (Argo CD) applies the
commits. Until one runs beside the simulated cluster, the tests (and `scripts/kube-sim.sh`
users trying trainops out) use this function in its place. It does what an Argo CD sync
with `prune: true` and `CreateNamespace=true` does, and nothing more:

- every object under the GitOps path at the commit but its `argocd/` (the Application that
  syncs the path, which Argo CD leaves out too) is server-side applied
  (fieldValidation=Strict, field manager `trainops-standin-argocd`), namespaces first, then
  cluster-scoped objects (flavors, topologies, queues), then the rest; a missing namespace
  is created; each object gets the tracking label `trainops.dev/gitops-tracking` (a digest
  of repo, branch and path), as Argo CD tracks its objects by a label or annotation;
- what the path held at the previous commit that touched it and no longer holds is deleted,
  but only when the live object carries this tracking label (never an object someone else
  made);
- a Volcano Job its admission webhook refuses only because its Queue, applied just before
  it, is not yet opened by Volcano's controller (or not yet seen by the webhook) is applied
  again with trainops.retry's backoff, as Argo CD retries a sync (`syncPolicy.retry`).

No trainops command calls it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from trainops.cluster.client import Cluster, ObjectRefused
from trainops.cluster.dryrun import describe, queue_pending
from trainops.errors import InputError
from trainops.render.argocd import APPLICATION_FILE
from trainops.retry import Backoff

FIELD_MANAGER = "trainops-standin-argocd"
TRACKING_LABEL = "trainops.dev/gitops-tracking"
_ORDER = {"Namespace": 0, "Topology": 1, "ResourceFlavor": 2, "Queue": 2, "HyperNode": 2, "ClusterQueue": 3}


@dataclass(frozen=True)
class SyncResult:
    commit: str | None
    applied: list[str] = field(default_factory=list)  # Kind namespace/name
    pruned: list[str] = field(default_factory=list)


def tracking_id(repo: str, branch: str, path: str) -> str:
    return hashlib.sha256(f"{repo}\n{branch}\n{path}".encode()).hexdigest()[:32]


def _objects(files: dict[str, bytes]) -> list[dict[str, Any]]:
    own = APPLICATION_FILE.split("/", 1)[0] + "/"
    out = []
    for name in sorted(files):
        if name.endswith((".yaml", ".yml")) and not name.startswith(own):
            out += [doc for doc in yaml.safe_load_all(files[name].decode("utf-8")) if isinstance(doc, dict)]
    return out


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def _previous_commit(repo: str, branch: str, path: str, commit: str) -> str | None:
    from trainops.gitops import history  # lazy: loads subprocess

    entries = [e.commit for e in history(repo=repo, branch=branch, path=path, limit=200)]
    if commit not in entries:
        return None
    index = entries.index(commit)
    return entries[index + 1] if index + 1 < len(entries) else None


def apply_object(
    cluster: Cluster, obj: dict[str, Any], *, queues: set[str], commit: str | None = None
) -> dict[str, Any]:
    """Apply one object as the sync does (the object as the server stored it); a Volcano Job
    waiting for one of `queues`, the Queues applied with it (queue_pending), is retried."""

    backoff = Backoff(f"apply {describe(obj)}")
    while True:
        try:
            return cluster.apply(obj, dry_run=False, field_manager=FIELD_MANAGER)
        except ObjectRefused as err:
            if queue_pending(obj, err.message, queues) and backoff.wait(err.message):
                continue
            at = f" at {commit}" if commit else ""
            raise InputError(f"the cluster refuses {describe(obj)}{at}: {err}") from None


def sync(cluster: Cluster, *, repo: str, branch: str, path: str, commit: str | None = None) -> SyncResult:
    """Apply the tree under `path` at `commit` (default: the branch tip) and prune what the
    previous commit touching `path` held and this one does not (see the module docstring)."""
    from trainops.gitops import read_tree  # lazy: loads subprocess

    snapshot = read_tree(repo=repo, branch=branch, path=path, commit=commit)
    tracking = tracking_id(repo, branch, path)
    objects = sorted(_objects(snapshot.files), key=lambda o: _ORDER.get(str(o.get("kind")), 5))
    applied = []
    for namespace in sorted({_key(o)[2] for o in objects} - {""}):
        if cluster.get("v1", "Namespace", namespace) is None:
            cluster.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                dry_run=False,
                field_manager=FIELD_MANAGER,
            )
    queues = {_key(o)[3] for o in objects if o.get("kind") == "Queue"}
    for obj in objects:
        tracked = dict(obj)
        meta = dict(tracked.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), TRACKING_LABEL: tracking}
        tracked["metadata"] = meta
        apply_object(cluster, tracked, queues=queues, commit=snapshot.commit)
        applied.append(describe(obj))
    pruned = []
    before = _previous_commit(repo, branch, path, snapshot.commit) if snapshot.commit else None
    if before is not None:
        keep = {_key(o) for o in objects}
        for old in _objects(read_tree(repo=repo, branch=branch, path=path, commit=before).files):
            api_version, kind, namespace, name = _key(old)
            if (api_version, kind, namespace, name) in keep or not cluster.served(api_version, kind):
                continue
            live = cluster.get(api_version, kind, name, namespace=namespace or None)
            if live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(TRACKING_LABEL) == tracking:
                cluster.delete(api_version, kind, name, namespace=namespace or None)
                pruned.append(describe(old))
    return SyncResult(snapshot.commit, applied, pruned)
