"""Retention: the newest N and the best K by a metric stay; other step-N checkpoints go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.checkpoint.helpers import trainops_ckpt, watcher
from tests.registry.conftest import Target, make_tree
from trainops.checkpoint import CheckpointInfo, apply_retention, list_checkpoints, plan_retention
from trainops.errors import NotFoundError
from trainops.manifest.stages import Retention
from trainops.registry import listing as listing_mod
from trainops.registry import pulling, store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage, Parent
from trainops.registry.reference import Reference
from trainops.registry.retention.gc import collect

# step → val_loss: the best (lowest) are steps 2 and 3, the worst (highest) 6 and 1.
LOSSES = {1: 3.0, 2: 1.0, 3: 1.5, 4: 2.0, 5: 2.5, 6: 4.0, 7: 2.2, 8: 2.1}


def _info(step: int, loss: float | None = None, tag: str | None = None) -> CheckpointInfo:
    metrics = {} if loss is None else {"val_loss": loss}
    digest = "sha256:" + f"{step:064x}"
    return CheckpointInfo(tag or f"step-{step}", digest, f"r:{tag}@{digest}", step, "run", metrics, None, None)


def _kept(keep: Retention, infos: list[CheckpointInfo], protect: tuple[str, ...] = ()) -> list[str]:
    return sorted(i.tag for i in plan_retention(infos, keep, protect).keep)


def test_plan_last_and_best_min_and_max() -> None:
    infos = [_info(s, loss) for s, loss in LOSSES.items()]
    assert _kept(Retention(last=2), infos) == ["step-7", "step-8"]
    assert _kept(Retention(last=2, best=2, metric="val_loss", mode="min"), infos) == [
        "step-2",
        "step-3",
        "step-7",
        "step-8",
    ]
    assert _kept(Retention(last=1, best=2, metric="val_loss", mode="max"), infos) == ["step-1", "step-6", "step-8"]
    assert _kept(Retention(last=1), infos, protect=("step-4", infos[0].digest)) == ["step-1", "step-4", "step-8"]


def test_plan_leaves_other_tags_and_stepless_checkpoints_alone() -> None:
    infos = [_info(1, 1.0), _info(2, 2.0), _info(3, None), _info(2, 2.0, tag="best"), _info(9, 0.1, tag="v9")]
    plan = plan_retention(infos, Retention(last=1, best=1, metric="val_loss"))
    assert sorted(i.tag for i in plan.remove) == ["step-2"]  # no metric → never "best"; other tags untouched
    assert sorted(i.tag for i in plan.keep) == ["step-1", "step-3"]


def _push_all(registries: Registries, repo: Reference, tmp_path: Path) -> dict[int, str]:
    digests: dict[int, str] = {}
    shared = b"tokenizer" * 100
    for step, loss in LOSSES.items():
        src = make_tree(
            tmp_path / f"c{step}",
            {"model.safetensors": f"weights {step}".encode() * 64, "tokenizer.json": shared},
        )
        lineage = Lineage(step=step, metrics={"val_loss": loss}, run_id="r")
        pushed = store.push(
            registries, source=src, ref=repo.with_tag(f"step-{step}"), kind="checkpoint", lineage=lineage
        )
        digests[step] = pushed.digest
    return digests


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_apply_retention(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    repo = registries.ref("team/ckpt")
    digests = _push_all(registries, repo, tmp_path)
    store.tag(registries, src=repo.with_tag("step-5"), dst=repo.with_tag("release"))  # someone else's tag
    other = make_tree(tmp_path / "other", {"notes.md": b"# not a checkpoint"})
    store.push(registries, source=other, ref=repo.with_tag("step-99"), kind="other")
    keep = Retention(last=2, best=1, metric="val_loss", mode="min")
    assert apply_retention(registries, repository=repo, keep=keep, protect=["step-4"], dry_run=True).removed == [
        "step-1",
        "step-3",
        "step-5",
        "step-6",
    ]
    assert len(list_checkpoints(registries, repository=repo)) == 9  # dry run removed nothing
    removed = apply_retention(registries, repository=repo, keep=keep, protect=["step-4"]).removed
    tags = {i.tag for i in list_checkpoints(registries, repository=repo)}
    if target.scheme == "oci":
        # Distribution removes a tag by deleting the manifest, which another tag (release) still names.
        assert removed == ["step-1", "step-3", "step-6"]
        assert tags == {"step-2", "step-4", "step-5", "step-7", "step-8", "release"}
    else:
        assert removed == ["step-1", "step-3", "step-5", "step-6"]
        assert tags == {"step-2", "step-4", "step-7", "step-8", "release"}
    assert store.resolve(registries, ref=repo.with_tag("step-99")).parsed.kind == "other"
    backend = registries.backend(repo)
    for step in (1, 3, 6):  # untagged: the manifest went too, so gc can reclaim its blobs
        with pytest.raises(NotFoundError):
            backend.get_manifest(repo.repository, digests[step])
    assert backend.get_manifest(repo.repository, digests[5]).digest == digests[5]  # release still names it
    assert apply_retention(registries, repository=repo, keep=keep, protect=["step-4"]).removed == []


def test_gc_reclaims_what_retention_removed(tmp_path: Path) -> None:
    """Later checkpoints name earlier ones as parents, and gc keeps parents: retention
    deletes the untagged manifests so the blobs really go."""
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("team/ckpt")
    d = tmp_path / "run"
    w = watcher(registries, d, repo)
    for step in range(1, 6):
        trainops_ckpt(d, step)
        w.scan()
    blobs = tmp_path / "registry" / "team" / "ckpt" / "blobs" / "sha256"
    before = len(list(blobs.iterdir()))
    assert apply_retention(registries, repository=repo, keep=Retention(last=2)).removed == [
        "step-1",
        "step-2",
        "step-3",
    ]
    result = collect(registries, root=registries.root())
    assert result.removed_blobs >= 3 * 3  # three files of each of three checkpoints (and their configs)
    assert len(list(blobs.iterdir())) < before
    kept = pulling.pull(registries, ref=repo.with_tag("step-5"), dest=tmp_path / "out")
    assert json.loads((tmp_path / "out" / "trainer_state.json").read_text())["step"] == 5
    assert kept.files


@pytest.mark.parametrize(
    ("mode", "kept", "removed"),
    [("min", [1, 4, 5], [2, 3]), ("max", [2, 4, 5], [1, 3])],
)
def test_watcher_applies_retention_after_each_push(
    tmp_path: Path, mode: str, kept: list[int], removed: list[int]
) -> None:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("team/ckpt")
    d = tmp_path / "run"
    losses = {1: 1.0, 2: 3.0, 3: 2.0, 4: 2.5, 5: 2.6}
    events: list[str] = []
    w = watcher(
        registries,
        d,
        repo,
        keep=Retention.model_validate({"last": 2, "best": 1, "metric": "val_loss", "mode": mode}),
        on_event=lambda e: events.append(e.message) if e.kind == "removed" else None,
    )
    for step, loss in losses.items():
        trainops_ckpt(d, step, metrics={"val_loss": loss})
        w.scan()
    assert [i.tag for i in list_checkpoints(registries, repository=repo)] == [f"step-{s}" for s in kept]
    assert events == [f"{repo.repo_url}:step-{s}" for s in removed]
    assert (d / "step-000002").is_dir() and (d / "step-000001").is_dir()  # local files are the trainer's


@pytest.mark.parametrize("target", ["file", "oci", "s3"], indirect=True)
def test_lineage_walks_through_pruned_checkpoints(target: Target, tmp_path: Path) -> None:
    from trainops.registry.lineage import lineage_graph, to_tree

    registries = target.registries
    repo = registries.ref("team/chain")
    digests: dict[int, str] = {}
    for step in range(1, 6):  # a chain: each checkpoint names the one before as its parent
        src = make_tree(tmp_path / f"k{step}", {"model.safetensors": f"w{step}".encode() * 64})
        parents = [] if step == 1 else [Parent(digest=digests[step - 1], ref=f"{repo}:step-{step - 1}")]
        lineage = Lineage(step=step, metrics={"val_loss": 6.0 - step}, parents=parents)
        pushed = store.push(
            registries, source=src, ref=repo.with_tag(f"step-{step}"), kind="checkpoint", lineage=lineage
        )
        digests[step] = pushed.digest
    # the newest two stay, and step-1 as the "best" by the highest val_loss
    removed = apply_retention(
        registries, repository=repo, keep=Retention(last=2, best=1, metric="val_loss", mode="max")
    ).removed
    assert sorted(removed) == ["step-2", "step-3"]
    for step in (2, 3):  # the content is gone ...
        with pytest.raises(NotFoundError):
            registries.backend(repo).get_manifest(repo.repository, digests[step])
    # ... but the newest one's lineage still reaches the first, through the pruned records
    graph = lineage_graph(registries, ref=repo.with_tag("step-5"))
    assert set(graph.nodes) == set(digests.values())
    for step, digest in digests.items():
        node = graph.nodes[digest]
        assert node.step == step and not node.missing
        assert node.pruned == (step in (2, 3))
        assert node.metrics == {"val_loss": 6.0 - step}
    assert "(pruned)" in to_tree(graph)
    # and down from the first: the registry scan finds the pruned ones by their records
    down = lineage_graph(registries, ref=repo.with_tag("step-1"), direction="down")
    assert set(down.nodes) == set(digests.values())
    assert [down.nodes[digests[s]].pruned for s in range(1, 6)] == [False, True, True, False, False]
    # gc reclaims the pruned checkpoints' blobs and keeps their records whole
    freed = collect(registries, root=registries.root())
    if registries.root().scheme != "oci":  # a Distribution registry collects its own blobs
        assert freed.removed_blobs >= 2  # the two pruned weights files
    assert not [m for m in freed.removed_manifests if "pruned" in m]
    after_gc = lineage_graph(registries, ref=repo.with_tag("step-5"))
    assert set(after_gc.nodes) == set(digests.values())
    assert [after_gc.nodes[digests[s]].pruned for s in range(1, 6)] == [False, True, True, False, False]
    # the records are not checkpoints, and listings count them instead of showing them
    assert [i.step for i in list_checkpoints(registries, repository=repo)] == [1, 4, 5]
    listing = listing_mod.list_repository(registries, ref=repo)
    assert sorted(t.tag for t in listing.tags) == ["step-1", "step-4", "step-5"] and listing.pruned_records == 2
    everything = listing_mod.list_repository(registries, ref=repo, records=True)
    assert sorted(t.tag for t in everything.tags if t.tag.startswith("pruned-")) == sorted(
        "pruned-" + digests[s].replace(":", "-") for s in (2, 3)
    )
