"""Rollouts in the browser's lineage graph: started with a manifest whose spec.rollout is set,
the graph of a release shows the rollout commits of the GitOps repo that served it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from trainops.registry.context import open_registries
from trainops.registry.store import resolve
from trainops.ui.app import create_app
from trainops.ui.index import Index, refresh
from trainops.ui.views import Browser
from trainops_testing.cli import run
from trainops_testing.projects import IMAGE, Project, make_project
from trainops_testing.services import free_port, git_env
from ui.conftest import ServerThread


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    return make_project(tmp_path / "project")


def _rollout(project: Project, *args: str) -> dict[str, object]:
    outcome = run("rollout", *project.cli(*args, "-o", "json"))
    assert outcome.code == 0, outcome.stderr
    data = json.loads(outcome.stdout)
    assert isinstance(data, dict)
    return data


def _serve(project: Project, tmp: Path, *, with_manifest: bool) -> Iterator[tuple[str, str]]:
    """(base URL, digest of release v2) of a ui over the project's registry."""
    opened = open_registries(file=str(project.manifest), env=None, insecure=False)
    with opened.registries as registries:
        url = registries.default_registry
        assert url is not None
        index = Index(tmp / ("with.sqlite" if with_manifest else "without.sqlite"))
        assert not refresh(index, registries, urls=[url]).errors
        v2 = resolve(registries, ref=registries.ref("tiny-llm/model:v2")).manifest.digest
        manifest = opened.manifest if with_manifest else None
        server = ServerThread(
            create_app(Browser(index=index, registries=registries, urls=[url], manifest=manifest)), free_port()
        )
        server.start()
        try:
            yield f"http://127.0.0.1:{server.port}", v2
        finally:
            server.stop()


def test_the_graph_of_a_release_shows_the_rollout_commits_that_served_it(project: Project, tmp_path: Path) -> None:
    _rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    started = _rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    for base, v2 in _serve(project, tmp_path, with_manifest=True):
        graph = requests.get(f"{base}/api/lineage/{v2}", timeout=60).json()
        rollouts = [n for n in graph["nodes"] if n["kind"] == "rollout"]
        assert [n["gitCommit"] for n in rollouts] == [started["commit"]], graph
        node = rollouts[0]
        assert node["id"] == f"commit:{started['commit']}"
        assert node["label"] == f"rollout {str(started['commit'])[:12]} start 1/3 10%"  # action, step, weight
        assert node.get("repository") is None  # text only: no artifact page to link to
        edges = [e for e in graph["edges"] if e["child"] == node["id"]]
        assert edges == [{"child": node["id"], "parent": v2, "relation": "start 1/3 10%"}]

        page = requests.get(f"{base}/lineage/{v2}", timeout=60).text
        item = re.search(r"<li><span data-id=\"commit:[0-9a-f]+\">([^<]*)</span>", page)
        assert item is not None and item.group(1) == node["label"], page


def test_without_a_manifest_the_graph_has_no_rollouts(project: Project, tmp_path: Path) -> None:
    _rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    for base, v2 in _serve(project, tmp_path, with_manifest=False):
        graph = requests.get(f"{base}/api/lineage/{v2}", timeout=60).json()
        assert graph["root"] == v2
        assert not [n for n in graph["nodes"] if n["kind"] == "rollout"]


def test_a_releases_page_says_how_the_rollout_serves_it(project: Project, tmp_path: Path) -> None:
    _rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    _rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    _rollout(project, "promote")
    status = _rollout(project, "status")
    weight, step = status["weight"], status["step"]
    assert isinstance(weight, int) and 0 < weight < 100
    for base, v2 in _serve(project, tmp_path, with_manifest=True):
        page = requests.get(f"{base}/artifact/{v2}", timeout=60).text
        note = re.search(r'<p id="serving">(.*?)</p>', page, re.S)
        assert note is not None, page
        assert f"as the canary at {weight}% (step {step})" in note.group(1) and "clusters/dev-serve" in note.group(1)
        assert "in the cluster" not in note.group(1)  # started without a kubeconfig
        stable = requests.get(f"{base}/artifact/{_digest(project, 'tiny-llm/model:v1')}", timeout=60).text
        assert f"as stable, {100 - weight}% while v2 is the canary" in stable
        v3 = requests.get(f"{base}/artifact/{_digest(project, 'tiny-llm/model:v3')}", timeout=60).text
        assert 'id="files"' in v3 and 'id="serving"' not in v3  # served by nothing
    (tmp_path / "without").mkdir()
    for base, v2 in _serve(project, tmp_path / "without", with_manifest=False):
        assert 'id="serving"' not in requests.get(f"{base}/artifact/{v2}", timeout=60).text


def _digest(project: Project, name: str) -> str:
    opened = open_registries(file=str(project.manifest), env=None, insecure=False)
    with opened.registries as registries:
        return resolve(registries, ref=registries.ref(name)).manifest.digest


def test_a_disaggregated_releases_page_lists_the_pools_revisions_and_weights_that_served_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from the GitOps history: v2's pair entered as the canary pool at 10%, went to 50% and
    100%, then served as the stable pool at 100% — each row a commit, its pool, the pair's
    revision and the HTTPRoute's weight; the lineage graph's edges say the same."""
    from tests.rollout.test_disagg import overlay

    for name, value in git_env({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINOPS_CACHE_DIR", str(tmp_path / "cache"))
    project = make_project(tmp_path / "project", overlay())
    _rollout(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    commits = [str(_rollout(project, "start", "tiny-llm/model:v2", "--image", IMAGE)["commit"])]
    commits += [str(_rollout(project, "promote")["commit"]) for _ in range(3)]
    for base, v2 in _serve(project, tmp_path, with_manifest=True):
        page = requests.get(f"{base}/artifact/{v2}", timeout=60).text
        table = re.search(r'<table class="list" id="pools">(.*?)</table>', page, re.S)
        assert table is not None, page
        rows = re.findall(
            r"<tr><td>[^<]*</td><td class=\"digest\">([0-9a-f]{12})</td><td>([^<]*)</td><td>([^<]*)</td>"
            r"<td class=\"digest\">([^<]*)</td><td class=\"num\">(\d+)%</td></tr>",
            table.group(1),
        )
        assert [(c, a, p, w) for c, a, p, _, w in rows] == [
            (commits[0][:12], "start 1/3 10%", "tiny-llm-canary", "10"),
            (commits[1][:12], "promote 2/3 50%", "tiny-llm-canary", "50"),
            (commits[2][:12], "promote 3/3 100%", "tiny-llm-canary", "100"),
            (commits[3][:12], "promote stable", "tiny-llm-stable", "100"),
        ]
        assert len({r[3] for r in rows}) == 1  # one revision of the pair throughout
        graph = requests.get(f"{base}/api/lineage/{v2}", timeout=60).json()
        relations = [e["relation"] for e in graph["edges"] if e["child"].startswith("commit:")]
        assert f"start 1/3 10% · pool tiny-llm-canary {rows[0][3]} 10%" in relations, relations
