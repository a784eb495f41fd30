"""Nothing served is lost, nor what a kept artifact needs, whichever path deletes.

A project as the first day leaves it: checkpoints, an eval report of one, the release made
from it (with its provenance) served as stable by the GitOps repo, an older release and a
newer one. `ckpt prune`, `registry gc --keep-last` and `registry rm` each ask the one home
(trainops.registry.retention.keep); each keeps the served release, its eval report, its provenance
and the checkpoint it came from, a release unless `--force --reason`, and says why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.registry.conftest import Target, make_tree
from tests.registry.test_release_tags import serving_manifest, target_env
from trainops.registry import media, store
from trainops.registry.backends.base import Descriptor
from trainops.registry.lineage_data import Lineage, Parent
from trainops_testing.cli import run


def _tree(tmp_path: Path, name: str, data: bytes, when: int) -> Path:
    """A tree whose newest mtime (the artifact's created time) is `when`."""
    root = make_tree(tmp_path / name, {"weights.bin": data})
    os.utime(root / "weights.bin", (when, when))
    return root


class Project:
    """The artifacts of the scenario, pushed to the target; digests by name."""

    def __init__(self, target: Target, tmp_path: Path) -> None:
        self.target = target
        reg = target.registries
        self.digests: dict[str, str] = {}

        def push(name: str, ref: str, when: int, **kwargs: object) -> str:
            src = _tree(tmp_path, name, name.encode() * 500, when)
            pushed = store.push(reg, source=src, ref=reg.ref(ref), **kwargs)  # type: ignore[arg-type]
            self.digests[name] = pushed.digest
            return pushed.digest

        ckpts = target.ref("proj/checkpoints")
        first = push("step-1", "proj/checkpoints:step-1", 1_000, kind="checkpoint", lineage=Lineage(step=1))
        parent = Lineage(step=2, parents=(Parent(digest=first, ref=ckpts, relation="resumed-from"),))
        second = push("step-2", "proj/checkpoints:step-2", 2_000, kind="checkpoint", lineage=parent)
        parent = Lineage(step=3, parents=(Parent(digest=second, ref=ckpts, relation="resumed-from"),))
        push("step-3", "proj/checkpoints:step-3", 3_000, kind="checkpoint", lineage=parent)
        manifest = store.resolve(reg, ref=reg.ref(f"proj/checkpoints@{first}")).manifest
        of_first = Descriptor(manifest.media_type, first, len(manifest.data))
        report = push("report", "proj/checkpoints", 1_100, subject=of_first)  # the eval report of step-1
        from_first = Lineage(parents=(Parent(digest=first, ref=ckpts, relation="parent"),))
        release_notes = {
            media.A_RELEASE_CHECKPOINT: f"{ckpts}:step-1@{first}",
            media.A_RELEASE_EVAL: f"{ckpts}@{report}",
        }
        for name, when in (("v0", 500), ("v1", 1_200), ("v2", 4_000)):
            lineage = from_first if name == "v1" else None
            push(name, f"proj/model:{name}", when, kind="model", annotations=release_notes, lineage=lineage)
        v1 = store.resolve(reg, ref=reg.ref("proj/model:v1")).manifest
        push("provenance", "proj/model", 1_300, subject=Descriptor(v1.media_type, v1.digest, len(v1.data)))

    def present(self, name: str, repo: str) -> bool:
        from trainops.errors import NotFoundError

        reg = self.target.registries
        try:
            store.resolve(reg, ref=reg.ref(f"{repo}@{self.digests[name]}"))
        except NotFoundError:
            return False
        return True


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_every_deleting_path_keeps_what_is_served_and_what_it_needs(target: Target, tmp_path: Path) -> None:
    project = Project(target, tmp_path)
    manifest = str(serving_manifest(target, tmp_path))
    env = target_env(target)
    started = run("rollout", "start", "proj/model:v1", "-f", manifest, env=env)
    assert started.code == 0, started.stderr
    commit = json.loads(run("rollout", "status", "-f", manifest, "-o", "json", env=env).stdout)["commit"]
    served = f"served as stable by the GitOps repo (commit {commit[:12]} in clusters/dev-serve)"
    v1 = target.ref("proj/model:v1")

    # Retention: the newest checkpoint stays by the policy, step-1 because the served release came from it.
    pruned = run("ckpt", "prune", "proj/checkpoints", "--keep-last", "1", "-f", manifest, env=env)
    assert pruned.code == 0, pruned.stderr
    assert f"kept {target.ref('proj/checkpoints:step-1')}: a lineage parent of {v1}" in pruned.stdout.splitlines()
    assert f"removed {target.ref('proj/checkpoints:step-2')}" in pruned.stdout.splitlines()
    assert project.present("step-1", "proj/checkpoints") and not project.present("step-2", "proj/checkpoints")

    # gc --keep-last 1: v2 by the rule; v1 served, v0 a release; what v1 needs, said why.
    done = run("registry", "gc", "--keep-last", "1", "-f", manifest, "-o", "json", env=env)
    assert done.code == 0, done.stderr
    kept = {k["artifact"]: k["reason"] for k in json.loads(done.stdout)["keptFor"]}
    assert kept[v1] == served
    assert kept[target.ref("proj/model:v0")] == "a release (--force --reason TEXT to remove it)"
    provenance = f"{target.ref('proj/model')}@{project.digests['provenance'][:19]}"
    assert kept[provenance] == f"a referrer of {v1}"
    for name, repo in (("v0", "proj/model"), ("v1", "proj/model"), ("provenance", "proj/model")):
        assert project.present(name, repo), name
    for name in ("step-1", "report", "step-3"):
        assert project.present(name, "proj/checkpoints"), name
    text = run("registry", "gc", "--keep-last", "1", "--dry-run", "-f", manifest, env=env)
    assert f"kept {v1}: {served}" in text.stdout.splitlines(), text.stdout

    # --force --reason lets the unserved release go; never the served one nor what it needs.
    forced = run("registry", "gc", "--keep-last", "1", "--force", "--reason", "old", "-f", manifest, env=env)
    assert forced.code == 0, forced.stderr
    assert not project.present("v0", "proj/model")
    assert project.present("v1", "proj/model") and project.present("provenance", "proj/model")
    assert project.present("report", "proj/checkpoints") and project.present("step-1", "proj/checkpoints")
    pulled = run("pull", "proj/model:v1", str(tmp_path / "pulled"), "-f", manifest, env=env)
    assert pulled.code == 0, pulled.stderr

    # registry rm of what the served release needs: refused in one line, nothing removed.
    report = f"{target.ref('proj/checkpoints')}@{project.digests['report']}"
    for ref in (report, f"{target.ref('proj/model')}@{project.digests['provenance']}"):
        refused = run("registry", "rm", ref, "-f", manifest, env=env)
        assert refused.code == 5, refused.stderr
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert f"of {v1}; it cannot be removed" in refused.stderr
    assert project.present("report", "proj/checkpoints") and project.present("provenance", "proj/model")


@pytest.mark.parametrize("target", ["file"], indirect=True)
def test_the_watchers_retention_keeps_the_checkpoint_a_release_came_from(target: Target, tmp_path: Path) -> None:
    from tests.checkpoint.helpers import trainops_ckpt, watcher
    from trainops.checkpoint.watch import WatchEvent
    from trainops.manifest.stages import Retention

    project = Project(target, tmp_path)
    events: list[WatchEvent] = []
    repo = target.registries.ref("proj/checkpoints")
    run_dir = tmp_path / "run"
    w = watcher(target.registries, run_dir, repo, on_event=events.append, keep=Retention(last=1))
    trainops_ckpt(run_dir, 4)
    w.scan(final=True)
    said = [(e.kind, e.message) for e in events if e.kind in ("removed", "kept")]
    v1 = target.ref("proj/model:v1")
    assert ("kept", f"{target.ref('proj/checkpoints:step-1')}: a lineage parent of {v1}") in said
    assert ("removed", target.ref("proj/checkpoints:step-2")) in said
    assert project.present("step-1", "proj/checkpoints") and not project.present("step-2", "proj/checkpoints")
    trainops_ckpt(run_dir, 5)
    w.scan(final=True)  # step-4 goes; step-1 stays, said once
    assert ("removed", target.ref("proj/checkpoints:step-4")) in [(e.kind, e.message) for e in events]
    assert len([e for e in events if e.kind == "kept"]) == 1
    assert project.present("step-1", "proj/checkpoints")


@pytest.mark.parametrize("target", ["file", "s3"], indirect=True)
def test_a_release_whose_tag_was_removed_on_purpose_goes_at_the_next_gc(target: Target, tmp_path: Path) -> None:
    project = Project(target, tmp_path)
    env = target_env(target)
    removed = run("registry", "rm", target.ref("proj/model:v0"), "--force", "--reason", "bad weights", env=env)
    assert removed.code == 0, removed.stderr
    assert project.present("v0", "proj/model")  # the tag went; the manifest waits for gc
    done = run("registry", "gc", target.url, "-o", "json", env=env)
    assert done.code == 0, done.stderr
    assert f"{target.ref('proj/model')}@{project.digests['v0']}" in json.loads(done.stdout)["removedManifests"]
    assert not project.present("v0", "proj/model") and project.present("v1", "proj/model")
