"""read_tree and write_tree's guard against real bare repositories."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from trainops.errors import NotFoundError
from trainops.gitops import read_tree, write_tree

from .helpers import commit_as_someone_else, tip


def _write(remote: Path, files: Mapping[str, str | bytes], **kwargs: object) -> str | None:
    result = write_tree(
        repo=str(remote),
        branch="main",
        path="serve",
        files=files,
        message="serve",
        **kwargs,  # type: ignore[arg-type]
    )
    return result.commit


def test_read_tree_gives_the_bytes_at_the_tip_and_at_an_earlier_commit(git_remote: Path) -> None:
    assert read_tree(repo=str(git_remote), branch="main", path="serve").commit is None
    first = _write(git_remote, {"a.yaml": b"a: 1\r\n", "sub/b.json": "{}\n"})
    _write(git_remote, {"a.yaml": "a: 2\n"})
    now = read_tree(repo=str(git_remote), branch="main", path="serve")
    assert now.commit == tip(git_remote) and now.files == {"a.yaml": b"a: 2\n"}
    assert first is not None
    then = read_tree(repo=str(git_remote), branch="main", path="serve", commit=first)
    assert then.files == {"a.yaml": b"a: 1\r\n", "sub/b.json": b"{}\n"}  # as written, no filters


def test_read_tree_refuses_a_commit_that_is_not_on_the_branch(git_remote: Path) -> None:
    _write(git_remote, {"a.yaml": "a\n"})
    with pytest.raises(NotFoundError):
        read_tree(repo=str(git_remote), branch="main", path="serve", commit="0" * 40)


def test_guard_sees_the_tip_and_can_refuse_it(git_remote: Path, tmp_path: Path) -> None:
    _write(git_remote, {"state": "1\n"})
    seen: list[dict[str, bytes]] = []

    def guard(files: Mapping[str, bytes]) -> bool:
        seen.append(dict(files))
        return files.get("state") == b"1\n"

    assert _write(git_remote, {"state": "2\n"}, guard=guard) is not None
    assert seen == [{"state": b"1\n"}]
    before = tip(git_remote)
    result = write_tree(
        repo=str(git_remote), branch="main", path="serve", files={"state": "3\n"}, message="x", guard=guard
    )
    assert result.stale and not result.changed and result.commit is None
    assert tip(git_remote) == before
    # another writer outside the path does not make the guard refuse
    commit_as_someone_else(git_remote, tmp_path / "other", {"README": "hi\n"}, "readme")
    assert _write(git_remote, {"state": "1\n"}, guard=lambda files: files.get("state") == b"2\n") is not None
