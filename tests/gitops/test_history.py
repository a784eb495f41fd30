"""history: newest first, filtered by path, trailers parsed, paths listed; missing things."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops import clock
from trainops.errors import InputError, NotFoundError
from trainops.gitops import history, write_tree

from .helpers import commit_as_someone_else, git


def _deploy(remote: Path, path: str, run: str, files: dict[str, str]) -> str:
    result = write_tree(
        repo=str(remote),
        branch="main",
        path=path,
        files=files,
        message=f"deploy {path} run {run}",
        trailers={"Trainops-Pipeline": path.rsplit("/", 1)[-1], "Trainops-Run": run},
    )
    assert result.commit is not None
    return result.commit


def test_history_is_newest_first_with_trailers_and_paths(git_remote: Path, tmp_path: Path) -> None:
    first = _deploy(git_remote, "clusters/a", "r1", {"job.yaml": "1", "q.yaml": "1"})
    second = _deploy(git_remote, "clusters/b", "r2", {"job.yaml": "2"})
    theirs = commit_as_someone_else(git_remote, tmp_path / "other", {"README.md": "hi\n"}, "docs\n\nplain body")
    third = _deploy(git_remote, "clusters/a", "r3", {"job.yaml": "3"})

    entries = history(repo=str(git_remote), branch="main")
    assert [e.commit for e in entries] == [third, theirs, second, first]
    assert entries[0].subject == "deploy clusters/a run r3"
    assert entries[0].trailers == {"Trainops-Pipeline": "a", "Trainops-Run": "r3"}
    assert entries[0].paths == ["clusters/a/job.yaml", "clusters/a/q.yaml"]
    assert entries[1].trailers == {} and entries[1].paths == ["README.md"] and entries[1].subject == "docs"
    committed = git("--git-dir", str(git_remote), "log", "-1", "--format=%cI", third)  # git's strict ISO 8601
    assert entries[0].date == clock.iso(clock.parse(committed))  # the same moment in the one format

    only_a = history(repo=f"file://{git_remote}", branch="main", path="clusters/a")
    assert [e.commit for e in only_a] == [third, first]
    assert only_a[1].paths == ["clusters/a/job.yaml", "clusters/a/q.yaml"]
    assert [e.commit for e in history(repo=str(git_remote), branch="main", path="clusters/a", limit=1)] == [third]
    assert history(repo=str(git_remote), branch="main", path="clusters/none") == []


def test_a_limited_history_lists_true_paths_for_its_oldest_entry(git_remote: Path) -> None:
    for n in range(5):
        _deploy(git_remote, "clusters/a", f"r{n}", {"job.yaml": str(n), "static.yaml": "same"})
    entries = history(repo=str(git_remote), branch="main", limit=2)
    assert [e.trailers["Trainops-Run"] for e in entries] == ["r4", "r3"]
    assert entries[-1].paths == ["clusters/a/job.yaml"]  # not every file, as a shallow boundary would show


def test_history_of_missing_things(git_remote: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="branch main does not exist"):
        history(repo=str(git_remote), branch="main")
    with pytest.raises(NotFoundError, match="does not exist"):
        history(repo=str(tmp_path / "nowhere.git"), branch="main")
    _deploy(git_remote, "clusters/a", "r1", {"job.yaml": "1"})
    with pytest.raises(NotFoundError, match="branch envs/prod does not exist"):
        history(repo=str(git_remote), branch="envs/prod")
    with pytest.raises(InputError):
        history(repo=str(git_remote), branch="main", path="../etc")
    with pytest.raises(InputError, match="limit"):
        history(repo=str(git_remote), branch="main", limit=0)
