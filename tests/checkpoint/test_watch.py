"""The watcher against real registries: what it pushes, with which lineage, and what it
remembers across restarts."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from tests.checkpoint.helpers import (
    deepspeed_ckpt,
    hf_ckpt,
    megatron_ckpt,
    trainops_ckpt,
    wait_for,
    watcher,
)
from tests.registry.conftest import Target
from trainops.checkpoint import WatchEvent, latest_checkpoint, list_checkpoints, restore_latest
from trainops.checkpoint.catalog import A_LAYOUT, A_NAME
from trainops.errors import ExistsError, InputError, NotFoundError
from trainops.registry import pulling, store
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.reference import Reference

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def local(tmp_path: Path) -> tuple[Registries, Reference]:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    return registries, registries.ref("team/ckpt")


def _tags(registries: Registries, repository: Reference) -> dict[str, str]:
    return {i.tag: i.digest for i in list_checkpoints(registries, repository=repository)}


def _lineage(registries: Registries, repository: Reference, tag: str) -> Lineage:
    return store.resolve(registries, ref=repository.with_tag(tag)).parsed.lineage()


def _build(layout: str, d: Path) -> tuple[list[str], list[int]]:
    """A directory of the layout with complete and incomplete checkpoints: (names, steps) of the complete."""
    if layout == "trainops":
        trainops_ckpt(d, 100)
        trainops_ckpt(d, 200)
        tmp = d / ".tmp-step-000300-9-beef"
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"half")
        return ["step-000100", "step-000200"], [100, 200]
    if layout == "huggingface":
        hf_ckpt(d, 100, eval_loss=1.5)
        hf_ckpt(d, 200, eval_loss=1.25, best=1.25)
        hf_ckpt(d, 300, state=False)  # killed before trainer_state.json
        return ["checkpoint-100", "checkpoint-200"], [100, 200]
    if layout == "megatron":
        megatron_ckpt(d, 100)
        megatron_ckpt(d, 200)
        megatron_ckpt(d, 300, tracker=False)
        return ["iter_0000100", "iter_0000200"], [100, 200]
    deepspeed_ckpt(d, 100)
    deepspeed_ckpt(d, 200)
    deepspeed_ckpt(d, 300, latest=False)
    return ["global_step100", "global_step200"], [100, 200]


@pytest.mark.parametrize("layout", ["trainops", "huggingface", "megatron", "deepspeed"])
@pytest.mark.parametrize("named", [True, False], ids=["named", "auto"])
def test_pushes_exactly_the_complete_checkpoints(
    local: tuple[Registries, Reference], tmp_path: Path, layout: str, named: bool
) -> None:
    registries, repo = local
    names, steps = _build(layout, tmp_path / "run")
    w = watcher(registries, tmp_path / "run", repo, layout=layout if named else "auto")
    pushed = w.scan(final=True)
    assert [p.name for p in pushed] == names
    assert [p.step for p in pushed] == steps
    assert sorted(_tags(registries, repo)) == [f"step-{s}" for s in steps]
    for p in pushed:
        parsed = store.resolve(registries, ref=repo.with_tag(f"step-{p.step}")).parsed
        assert parsed.kind == "checkpoint"
        assert parsed.annotations[A_NAME] == p.name
        assert parsed.annotations[A_LAYOUT] == layout
        lineage = parsed.lineage()
        assert (lineage.step, lineage.run_id) == (p.step, "run-a")
        assert p.ref == f"{repo.repo_url}:step-{p.step}@{p.digest}"
    files = set(pulling.pull(registries, ref=repo.with_tag("step-200"), dest=tmp_path / "o").files)
    source = tmp_path / "run" / names[1]
    assert files == {str(f.relative_to(source)) for f in source.rglob("*") if f.is_file()}
    assert w.scan(final=True) == []  # nothing twice


def test_metrics_travel_in_lineage(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    hf_ckpt(tmp_path / "hf", 100, eval_loss=1.5, best=1.25)
    watcher(registries, tmp_path / "hf", repo, layout="huggingface").scan(final=True)
    assert _lineage(registries, repo, "step-100").metrics == {
        "eval_loss": 1.5,
        "eval_accuracy": 0.5,
        "eval_runtime": 1.5,
        "best_metric": 1.25,
    }
    trainops_ckpt(tmp_path / "t", 5, metrics={"train_loss": 3.0, "val_loss": 2.5})
    repo2 = registries.ref("team/tiny")
    watcher(registries, tmp_path / "t", repo2).scan()
    assert list_checkpoints(registries, repository=repo2)[0].metrics == {"train_loss": 3.0, "val_loss": 2.5}


def test_lineage_chain_and_base_lineage(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "run"
    base = Lineage(pipeline="tiny-llm", image_digest=DIGEST, git_commit="abc1234")
    w = watcher(registries, d, repo, lineage=base)
    assert w.scan() == [] and w.resumed_from is None  # the directory does not exist yet
    trainops_ckpt(d, 10)
    [first] = w.scan()
    assert first.parent is None
    assert w.resumed_from is None
    trainops_ckpt(d, 20)
    [second] = w.scan()
    assert second.parent is not None
    assert (second.parent.digest, second.parent.relation) == (first.digest, "parent")
    assert second.parent.ref == f"{repo.repo_url}:step-10"
    lineage = _lineage(registries, repo, "step-20")
    assert (lineage.pipeline, lineage.image_digest, lineage.git_commit) == ("tiny-llm", DIGEST, "abc1234")
    assert [p.digest for p in lineage.parents] == [first.digest]


def test_restart_with_pushed_state_pushes_nothing_again(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "run"
    trainops_ckpt(d, 10)
    trainops_ckpt(d, 20)
    first = watcher(registries, d, repo).scan()
    state = json.loads((d / ".trainops" / "pushed.json").read_text())
    assert sorted(state["checkpoints"]) == ["step-000010", "step-000020"]
    again = watcher(registries, d, repo)
    assert again.scan() == []
    assert again.resumed_from is not None
    assert (again.resumed_from.digest, again.resumed_from.relation) == (first[1].digest, "resumed-from")
    trainops_ckpt(d, 30)
    [third] = again.scan()
    assert third.parent is not None
    assert (third.parent.digest, third.parent.relation) == (first[1].digest, "resumed-from")
    trainops_ckpt(d, 40)
    [fourth] = again.scan()
    assert fourth.parent is not None and (fourth.parent.digest, fourth.parent.relation) == (third.digest, "parent")


def test_checkpoint_left_unpushed_is_pushed_first_then_resumed_from(
    local: tuple[Registries, Reference], tmp_path: Path
) -> None:
    registries, repo = local
    d = tmp_path / "run"
    trainops_ckpt(d, 10)
    [first] = watcher(registries, d, repo).scan()
    trainops_ckpt(d, 20)  # written, then the watcher was killed before it pushed it
    w = watcher(registries, d, repo)
    [pushed] = w.scan()
    assert pushed.step == 20
    assert pushed.parent is not None and (pushed.parent.digest, pushed.parent.relation) == (first.digest, "parent")
    assert w.resumed_from is not None and w.resumed_from.digest == pushed.digest


def test_restart_after_restore_links_resumed_from(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    trainops_ckpt(tmp_path / "a", 10)
    trainops_ckpt(tmp_path / "a", 20)
    pushed = watcher(registries, tmp_path / "a", repo).scan()
    fresh = tmp_path / "b"
    restored = restore_latest(registries, repository=repo, directory=fresh)
    assert restored.restored is not None and restored.restored.digest == pushed[1].digest
    w = watcher(registries, fresh, repo, run_id="run-b")
    assert w.scan() == []  # the restored checkpoint is not pushed back
    assert w.resumed_from is not None
    assert (w.resumed_from.digest, w.resumed_from.relation) == (pushed[1].digest, "resumed-from")
    trainops_ckpt(fresh, 30)
    [new] = w.scan()
    assert new.parent is not None
    assert (new.parent.digest, new.parent.relation, new.parent.ref) == (
        pushed[1].digest,
        "resumed-from",
        f"{repo.repo_url}:step-20",
    )
    assert _tags(registries, repo)["step-20"] == pushed[1].digest  # untouched


def test_rewritten_checkpoint_is_pushed_again(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "run"
    trainops_ckpt(d, 10)
    w = watcher(registries, d, repo)
    [old] = w.scan()
    trainops_ckpt(d, 10)  # the same step written again (new content, renamed into place)
    [new] = w.scan()
    assert new.digest != old.digest
    assert _tags(registries, repo) == {"step-10": new.digest}
    assert w.scan() == []


def test_lost_state_adopts_what_the_registry_holds(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "run"
    trainops_ckpt(d, 10)
    trainops_ckpt(d, 20)
    first = watcher(registries, d, repo).scan()
    shutil.rmtree(d / ".trainops")
    w = watcher(registries, d, repo)
    assert w.scan() == []  # same files under the same tags: adopted, not pushed again
    assert _tags(registries, repo) == {"step-10": first[0].digest, "step-20": first[1].digest}
    assert w.resumed_from is not None and w.resumed_from.digest == first[1].digest


def test_another_runs_checkpoint_is_not_overwritten(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    trainops_ckpt(tmp_path / "a", 10)
    [theirs] = watcher(registries, tmp_path / "a", repo, run_id="run-a").scan()
    trainops_ckpt(tmp_path / "b", 10)
    trainops_ckpt(tmp_path / "b", 20)
    w = watcher(registries, tmp_path / "b", repo, run_id="run-b")
    with pytest.raises(ExistsError, match="holds another checkpoint \\(run run-a\\)"):
        w.scan()
    tags = _tags(registries, repo)
    assert tags["step-10"] == theirs.digest  # kept
    assert "step-20" in tags  # the other checkpoints still went out


def test_repository_must_not_name_a_tag(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    with pytest.raises(InputError, match="names a tag or digest"):
        watcher(registries, tmp_path, repo.with_tag("v1"))
    with pytest.raises(InputError, match="run id"):
        watcher(registries, tmp_path, repo, run_id="")
    with pytest.raises(InputError, match="unknown checkpoint layout"):
        watcher(registries, tmp_path, repo, layout="keras")


def test_hf_checkpoint_waits_to_settle(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "hf"
    d.mkdir()
    w = watcher(registries, d, repo, layout="huggingface", settle=0.3)
    assert w.scan() == []  # start-up: nothing there
    hf_ckpt(d, 100)
    written = time.monotonic()
    assert w.scan() == []  # just written: not settled yet
    pushed = wait_for(lambda: w.scan(), what="checkpoint-100 to settle and be pushed")
    assert [p.step for p in pushed] == [100]
    assert time.monotonic() - written >= 0.3
    hf_ckpt(d, 200, state=False)
    assert w.scan(final=True) == []  # no trainer_state.json: never complete, not even at the end


def test_hf_newer_checkpoint_completes_the_previous_one(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "hf"
    d.mkdir()
    w = watcher(registries, d, repo, layout="huggingface", settle=3600)
    w.scan()
    hf_ckpt(d, 100)
    assert w.scan() == []
    hf_ckpt(d, 200, state=False)  # the Trainer has moved on
    assert [p.step for p in w.scan()] == [100]
    (d / "checkpoint-200" / "trainer_state.json").write_text('{"global_step": 200, "log_history": []}')
    assert w.scan() == []  # the newest still has to settle…
    assert [p.step for p in w.scan(final=True)] == [200]  # …unless the Trainer has exited


def test_megatron_iteration_newer_than_tracker_is_never_pushed(
    local: tuple[Registries, Reference], tmp_path: Path
) -> None:
    registries, repo = local
    d = tmp_path / "mega"
    megatron_ckpt(d, 100)
    megatron_ckpt(d, 200, tracker=False)
    w = watcher(registries, d, repo)
    assert [p.step for p in w.scan()] == [100]
    assert w.scan(final=True) == []
    assert sorted(_tags(registries, repo)) == ["step-100"]
    (d / "latest_checkpointed_iteration.txt").write_text("200")
    assert [p.step for p in w.scan()] == [200]


def test_run_pushes_while_training_and_on_stop(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "run"
    d.mkdir()
    w = watcher(registries, d, repo, interval=0.05)
    stop = threading.Event()
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(w.run(stop)))
    thread.start()
    try:
        for step in (1, 2, 3):
            trainops_ckpt(d, step)
            wait_for(lambda s=step: f"step-{s}" in _tags(registries, repo), what=f"step-{step} pushed")
        trainops_ckpt(d, 4)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    [result] = results
    assert [p.step for p in result.pushed] == [1, 2, 3, 4]  # type: ignore[attr-defined]
    assert result.errors == [] and result.final_error is None  # type: ignore[attr-defined]
    assert result.scans >= 4  # type: ignore[attr-defined]


def test_run_survives_a_failing_scan(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    d = tmp_path / "mixed"
    trainops_ckpt(d, 1)
    hf_ckpt(d, 2)  # two layouts at once: every scan fails, the loop goes on
    stop = threading.Event()
    events: list[WatchEvent] = []
    w = watcher(registries, d, repo, on_event=events.append)
    thread = threading.Thread(target=lambda: w.run(stop))
    thread.start()
    wait_for(lambda: len(events) >= 3, what="three failed scans")
    assert all(e.kind == "error" and "more than one checkpoint layout" in e.message for e in events)
    stop.set()
    thread.join(30)
    with pytest.raises(NotFoundError):
        store.resolve(registries, ref=repo.with_tag("step-1"))


def test_two_watchers_on_one_directory_push_each_checkpoint_once(
    local: tuple[Registries, Reference], tmp_path: Path
) -> None:
    registries, repo = local
    d = tmp_path / "shared"
    d.mkdir()
    pushes: list[str] = []
    stop = threading.Event()

    def record(event: WatchEvent) -> None:
        if event.kind == "pushed":
            pushes.append(event.message)

    watchers = [watcher(registries, d, repo, on_event=record) for _ in range(2)]
    threads = [threading.Thread(target=lambda w=w: w.run(stop)) for w in watchers]
    for t in threads:
        t.start()
    try:
        for step in range(1, 6):
            trainops_ckpt(d, step)
        wait_for(lambda: len(_tags(registries, repo)) == 5, what="five checkpoints pushed")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert len(pushes) == 5
    assert len(json.loads((d / ".trainops" / "pushed.json").read_text())["checkpoints"]) == 5


def test_every_backend(target: Target, tmp_path: Path) -> None:
    registries = target.registries
    repo = registries.ref("team/ckpt")
    d = tmp_path / "run"
    megatron_ckpt(d, 10)
    megatron_ckpt(d, 20)
    pushed = watcher(registries, d, repo, keep=None).scan()
    infos = list_checkpoints(registries, repository=repo)
    assert [(i.tag, i.step, i.name, i.run_id) for i in infos] == [
        ("step-10", 10, "iter_0000010", "run-a"),
        ("step-20", 20, "iter_0000020", "run-a"),
    ]
    assert pushed[1].parent is not None and pushed[1].parent.digest == pushed[0].digest
    assert watcher(registries, d, repo).scan() == []


def test_latest_by_step_skips_other_kinds(local: tuple[Registries, Reference], tmp_path: Path) -> None:
    registries, repo = local
    assert latest_checkpoint(registries, repository=repo) is None  # no repository yet
    trainops_ckpt(tmp_path / "run", 1)
    trainops_ckpt(tmp_path / "run", 2)
    pushed = watcher(registries, tmp_path / "run", repo).scan()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# not a checkpoint")
    store.push(registries, source=notes, ref=repo.with_tag("step-99"), kind="other")
    store.tag(registries, src=repo.with_tag("step-2"), dst=repo.with_tag("best"))
    latest = latest_checkpoint(registries, repository=repo)
    assert latest is not None
    assert (latest.tag, latest.step, latest.digest) == ("step-2", 2, pushed[1].digest)
    assert [i.tag for i in list_checkpoints(registries, repository=repo)] == ["step-1", "best", "step-2"]


def test_a_checkpoint_names_its_training_image_as_a_parent_when_the_registry_holds_it(
    local: tuple[Registries, Reference], tmp_path: Path
) -> None:
    """The image the run trained in, pinned and in its repository: an `image` parent, so lineage
    walks checkpoint → image (→ commit, base). A digest the registry does not hold (a
    placeholder, a registry elsewhere) stays the lineage's imageDigest only."""
    registries, _ = local
    src = tmp_path / "image-src"
    src.mkdir()
    (src / "layer").write_text("image")
    image = store.push(registries, source=src, ref=registries.ref("team/image:abc"), kind="other").ref
    runs = {"in-registry": image, "elsewhere": registries.ref(f"team/image@{DIGEST}")}
    for name, pinned in runs.items():
        directory = tmp_path / name
        trainops_ckpt(directory, 10)
        repo = registries.ref(f"team/{name}")
        base = Lineage(image_digest=pinned.digest)
        watcher(registries, directory, repo, lineage=base, image=pinned).scan(final=True)
        parents = _lineage(registries, repo, "step-10").parents
        images = [(p.digest, p.ref) for p in parents if p.relation == "image"]
        expected = [(image.digest, str(image.with_digest(None)))] if name == "in-registry" else []
        assert images == expected, name
        assert _lineage(registries, repo, "step-10").image_digest == pinned.digest
