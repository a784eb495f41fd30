"""The browser's index: refreshed incrementally (only new digests are read), follows moved
and removed tags, and reads pruned records as the artifacts they record."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.registry.context import Registries
from trainops.registry.retention.removal import remove
from trainops.registry.store import push, tag
from trainops.ui import graph, queries
from trainops.ui.index import Index, natural_key, refresh
from ui.helpers import COMMIT, STEPS, fill


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))


def test_natural_order() -> None:
    names = ["step-10", "step-9", "v1.10", "v1.2", "latest", "step-100"]
    assert sorted(names, key=natural_key) == ["latest", "step-9", "step-10", "step-100", "v1.2", "v1.10"]


def test_refresh_reads_only_what_changed(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        filled = fill(registries, url, tmp_path / "work")
        index = Index(tmp_path / "index.sqlite")
        first = refresh(index, registries, urls=[url])
        assert first.errors == [] and first.repositories == 5
        # data v1; image; 3 checkpoints + the pruned record; eval report; model; hostile
        assert first.artifacts_added == 9
        again = refresh(index, registries, urls=[url])
        assert (again.artifacts_added, again.artifacts_removed, again.tags_changed) == (0, 0, 0)

        checkpoints = registries.ref(filled.repo("tiny/checkpoints"))
        # a tag moves to another artifact, one is removed, a new artifact is pushed
        tag(registries, src=checkpoints.with_tag("step-200"), dst=checkpoints.with_tag("step-300"))
        remove(registries, ref=checkpoints.with_tag("eval-step-400"))
        (tmp_path / "new").mkdir()
        (tmp_path / "new" / "w.bin").write_bytes(b"new")
        pushed = push(registries, source=tmp_path / "new", ref=checkpoints.with_tag("step-500"), kind="checkpoint")
        moved = refresh(index, registries, urls=[url])
        assert moved.artifacts_added == 1  # only the new digest was read
        assert moved.tags_changed == 3  # step-300 moved, eval-step-400 dropped, step-500 added
        db = index.connect()
        rows = {t.tag: t.digest for t in queries.tags(db, repository=checkpoints.repo_url).tags}
        assert rows["step-300"] == filled.checkpoints[200]
        assert rows["step-500"] == pushed.digest
        assert "eval-step-400" not in rows
        # the eval report is still in the repository untagged (a referrer): still indexed
        assert [r.digest for r in queries.artifact(db, digest=filled.checkpoints[400]).referrers] == [
            filled.eval_report
        ]


def test_removed_artifacts_leave_the_index(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        filled = fill(registries, url, tmp_path / "work")
        index = Index(tmp_path / "index.sqlite")
        refresh(index, registries, urls=[url])
        model = registries.ref(filled.repo("tiny/model"))
        remove(registries, ref=model.with_digest(filled.model))
        result = refresh(index, registries, urls=[url])
        assert result.artifacts_removed == 1
        db = index.connect()
        assert queries.search(db, query=filled.model).hits == []
        children = queries.artifact(db, digest=filled.checkpoints[STEPS[-1]]).children
        assert [c.digest for c in children] == [filled.eval_report]  # the model is gone


def test_graph_walks_through_the_pruned_checkpoint(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        filled = fill(registries, url, tmp_path / "work")
        index = Index(tmp_path / "index.sqlite")
        refresh(index, registries, urls=[url])
        found = graph.lineage(index.connect(), digest=filled.checkpoints[200])
        nodes = {n.id: n for n in found.nodes}
        assert nodes[filled.checkpoints[100]].pruned
        assert filled.dataset in nodes  # reached through the pruned one
        assert nodes[filled.image].kind == "image" and nodes[filled.image].git_commit == COMMIT  # from its labels
        relations = {(e.child, e.parent): e.relation for e in found.edges}
        # the run's first checkpoint links to its image and the image to the commit; the rest inherit
        assert relations[(filled.checkpoints[100], filled.image)] == "image"
        assert (filled.checkpoints[200], filled.image) not in relations
        assert relations[(filled.image, f"git:{COMMIT}")] == "built-from"
        assert [e.child for e in found.edges if e.parent == f"git:{COMMIT}"] == [filled.image]
        assert relations[(filled.checkpoints[100], filled.dataset)] == "dataset"
        # the report names the checkpoint as its subject and as its parent: one edge
        assert relations[(filled.eval_report, filled.checkpoints[400])] == "evaluated"
        assert sum(1 for e in found.edges if e.child == filled.eval_report and not e.parent.startswith("git:")) == 1


def test_prepare_builds_an_empty_index_and_serves_a_filled_one(tmp_path: Path) -> None:
    from trainops.errors import UsageError
    from trainops.ui.server import prepare

    url = f"file://{tmp_path / 'registry'}"
    with Registries(default_registry=url) as registries:
        fill(registries, url, tmp_path / "work")
        path = tmp_path / "index.sqlite"
        first = prepare(registries=registries, urls=[url], host="127.0.0.1", token=None, index_path=path)
        assert first.first_refresh is not None and first.first_refresh.repositories == 5
        assert first.browser.loopback_only and first.browser.token is None
        again = prepare(registries=registries, urls=[url], host="0.0.0.0", token="t0ken", index_path=path)
        assert again.first_refresh is None  # served at once, refreshed in the background
        assert not again.browser.loopback_only and again.browser.token == "t0ken"
        with pytest.raises(UsageError, match="not a loopback address"):
            prepare(registries=registries, urls=[url], host="192.0.2.1", token=None, index_path=path)
