"""write_tree against real bare repositories: content, trailers, stale files, refusals."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from trainops.errors import ExistsError, InputError, NotFoundError, RemoteError
from trainops.gitops import CommitResult, history, write_tree

from .helpers import clone, commit_as_someone_else, git, hook, tip

TRAILERS = {"Trainops-Pipeline": "tiny-llm", "Trainops-Image": "sha256:" + "ab" * 32, "Trainops-Run": "r-1"}


def _write(remote: Path | str, files: Mapping[str, Any], **kwargs: Any) -> CommitResult:
    args: dict[str, Any] = {
        "repo": str(remote),
        "branch": "main",
        "path": "clusters/tiny",
        "files": files,
        "message": "deploy tiny-llm",
        "trailers": TRAILERS,
    }
    args.update(kwargs)
    return write_tree(**args)


def test_first_write_creates_the_branch(git_remote: Path, tmp_path: Path) -> None:
    assert tip(git_remote) is None
    result = write_tree(
        repo=str(git_remote),
        branch="main",
        path="clusters/tiny",
        files={"job.yaml": "kind: Job\n", "conf/queue.yaml": "kind: Queue\n"},
        message="deploy tiny-llm\n\nrun r-1 on volcano",
        trailers=TRAILERS,
    )
    assert result.changed and result.attempts == 1 and result.removed == []
    assert result.commit == tip(git_remote)
    assert result.files == ["clusters/tiny/conf/queue.yaml", "clusters/tiny/job.yaml"]
    assert (result.repo, result.branch, result.path) == (str(git_remote), "main", "clusters/tiny")

    work = clone(git_remote, tmp_path / "work")
    assert (work / "clusters/tiny/job.yaml").read_text() == "kind: Job\n"
    assert (work / "clusters/tiny/conf/queue.yaml").read_text() == "kind: Queue\n"
    assert git("rev-list", "--count", "HEAD", cwd=work) == "1"

    body = git("log", "-1", "--format=%B", cwd=work)
    assert body.startswith("deploy tiny-llm\n\nrun r-1 on volcano\n\n")
    parsed = git("interpret-trailers", "--parse", input=body + "\n")
    assert parsed.splitlines() == [f"{k}: {v}" for k, v in TRAILERS.items()]
    (entry,) = history(repo=str(git_remote), branch="main")
    assert entry.commit == result.commit and entry.subject == "deploy tiny-llm"
    assert entry.trailers == TRAILERS
    assert entry.paths == result.files


def test_second_write_changes_only_what_differs(git_remote: Path, tmp_path: Path) -> None:
    first = _write(git_remote, {"a.yaml": "a: 1\n", "b.yaml": "b: 1\n", "c.yaml": "c: 1\n"})
    other = tmp_path / "other"
    theirs = commit_as_someone_else(
        git_remote, other, {"README.md": "hands off\n", "clusters/other/x.yaml": "x: 1\n"}, "someone else's work"
    )
    second = _write(git_remote, {"a.yaml": "a: 2\n", "b.yaml": "b: 1\n"}, message="deploy again")
    assert second.changed and second.commit != first.commit
    assert second.removed == ["clusters/tiny/c.yaml"]
    assert git("--git-dir", str(git_remote), "rev-parse", "main^") == theirs
    changes = git("--git-dir", str(git_remote), "diff", "--name-status", "main^", "main").splitlines()
    assert sorted(changes) == ["D\tclusters/tiny/c.yaml", "M\tclusters/tiny/a.yaml"]
    assert git("--git-dir", str(git_remote), "show", "main:README.md") == "hands off"
    assert git("--git-dir", str(git_remote), "show", "main:clusters/other/x.yaml") == "x: 1"

    before = tip(git_remote)
    same = _write(git_remote, {"a.yaml": "a: 2\n", "b.yaml": "b: 1\n"}, message="deploy again")
    assert not same.changed and same.commit is None and same.attempts == 0
    assert same.removed == [] and same.files == ["clusters/tiny/a.yaml", "clusters/tiny/b.yaml"]
    assert tip(git_remote) == before


def test_another_writers_changes_under_path_are_overwritten(git_remote: Path, tmp_path: Path) -> None:
    _write(git_remote, {"a.yaml": "a: 1\n"})
    commit_as_someone_else(
        git_remote, tmp_path / "other", {"clusters/tiny/a.yaml": "edited by hand\n", "clusters/tiny/extra": "x"}, "hand"
    )
    result = _write(git_remote, {"a.yaml": "a: 1\n"})
    assert result.changed and result.removed == ["clusters/tiny/extra"]
    assert git("--git-dir", str(git_remote), "ls-tree", "-r", "--name-only", "main") == "clusters/tiny/a.yaml"
    assert git("--git-dir", str(git_remote), "show", "main:clusters/tiny/a.yaml") == "a: 1"


def test_bytes_are_stored_exactly(git_remote: Path, tmp_path: Path) -> None:
    commit_as_someone_else(git_remote, tmp_path / "other", {".gitattributes": "* text eol=crlf\n"}, "attributes")
    data = b"line\r\nother\nbinary\x00\xff"
    _write(git_remote, {"blob.bin": data, "text.yaml": "a: é\n"})
    raw = git("--git-dir", str(git_remote), "cat-file", "blob", "main:clusters/tiny/text.yaml")
    assert raw == "a: é"
    out = subprocess.run(
        ["git", "--git-dir", str(git_remote), "cat-file", "blob", "main:clusters/tiny/blob.bin"],
        capture_output=True,
        check=True,
    ).stdout
    assert out == data
    modes = git("--git-dir", str(git_remote), "ls-tree", "-r", "main", "clusters/tiny").split()
    assert modes.count("100644") == 2


def test_empty_files_remove_the_directory_and_write_nothing_to_an_empty_remote(git_remote: Path) -> None:
    nothing = _write(git_remote, {})
    assert not nothing.changed and nothing.commit is None and tip(git_remote) is None
    _write(git_remote, {"a.yaml": "a\n", "d/b.yaml": "b\n"})
    gone = _write(git_remote, {}, message="tear down")
    assert gone.changed and gone.removed == ["clusters/tiny/a.yaml", "clusters/tiny/d/b.yaml"]
    assert git("--git-dir", str(git_remote), "ls-tree", "-r", "main") == ""


def test_a_file_under_path_can_become_a_directory(git_remote: Path) -> None:
    _write(git_remote, {"a": "file\n"})
    result = _write(git_remote, {"a/b.yaml": "now a directory\n"})
    assert result.removed == ["clusters/tiny/a"]
    assert git("--git-dir", str(git_remote), "ls-tree", "-r", "--name-only", "main") == "clusters/tiny/a/b.yaml"


def test_a_file_outside_path_in_the_way_is_refused(git_remote: Path, tmp_path: Path) -> None:
    commit_as_someone_else(git_remote, tmp_path / "other", {"clusters": "not a directory\n"}, "a file named clusters")
    before = tip(git_remote)
    with pytest.raises(ExistsError, match="clusters is a file on main"):
        _write(git_remote, {"a.yaml": "a\n"})
    assert tip(git_remote) == before


@pytest.mark.parametrize(
    "path", ["../x", "/etc/x", "a/../../b", "a//b", "./a", "a/./b", "", ".", "a/.git/hooks", "a\\b"]
)
def test_hostile_paths_are_refused_before_anything_is_written(tmp_path: Path, path: str) -> None:
    remote = tmp_path / "new.git"
    with pytest.raises(InputError):
        _write(remote, {"a.yaml": "a\n"}, path=path, create=True)
    with pytest.raises(InputError):
        _write(remote, {path: "a\n"}, create=True)
    assert not remote.exists()


def test_a_name_that_is_both_file_and_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="both as a file and as the directory"):
        _write(tmp_path / "new.git", {"a": "1", "a/b": "2"}, create=True)
    assert not (tmp_path / "new.git").exists()


def test_a_trailing_slash_on_path_is_dropped(git_remote: Path) -> None:
    result = _write(git_remote, {"a.yaml": "a\n"}, path="clusters/tiny/")
    assert result.path == "clusters/tiny" and result.files == ["clusters/tiny/a.yaml"]


def test_create_initializes_a_missing_local_repository(tmp_path: Path) -> None:
    remote = tmp_path / "project" / ".trainops" / "gitops.git"
    with pytest.raises(NotFoundError, match="does not exist") as info:
        _write(remote, {"a.yaml": "a\n"})
    assert "git init --bare" in str(info.value) and not remote.exists()

    result = _write(f"file://{remote}", {"a.yaml": "a\n"}, branch="envs/prod", create=True)
    assert result.changed and result.repo == f"file://{remote}"
    assert git("--git-dir", str(remote), "rev-parse", "--is-bare-repository") == "true"
    assert git("--git-dir", str(remote), "symbolic-ref", "HEAD") == "refs/heads/envs/prod"
    work = tmp_path / "work"
    git("clone", "--quiet", str(remote), str(work))  # HEAD names the branch: a plain clone checks it out
    assert (work / "clusters/tiny/a.yaml").read_text() == "a\n"
    again = _write(remote, {"a.yaml": "b\n"}, branch="envs/prod", create=True)
    assert again.changed and again.attempts == 1


def test_a_remote_whose_path_has_config_syntax_in_it_is_written(tmp_path: Path) -> None:
    """The remote URL is written into the scratch repository's config file by hand (never on
    a command line): '#' and ';' would start a comment, '"' and '\\' are escapes."""
    remote = tmp_path / 'odd #1; "quoted" \\ dir' / "gitops.git"
    result = _write(remote, {"a.yaml": "a\n"}, create=True)
    assert result.changed
    assert git("--git-dir", str(remote), "show", "main:clusters/tiny/a.yaml") == "a"


def test_a_directory_that_is_not_a_repository_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    with pytest.raises(NotFoundError, match="not found"):
        _write(tmp_path / "plain", {"a.yaml": "a\n"}, create=True)


def test_a_rejecting_hook_is_reported_in_one_line_and_changes_nothing(git_remote: Path) -> None:
    _write(git_remote, {"a.yaml": "a: 1\n"})
    before = tip(git_remote)
    objects_before = git("--git-dir", str(git_remote), "count-objects", "-v")
    hook(
        git_remote,
        "pre-receive",
        "#!/bin/sh\necho 'policy: main needs two approvals' >&2\necho 'see https://wiki.example/deploys' >&2\nexit 1\n",
    )
    with pytest.raises(RemoteError) as info:
        _write(git_remote, {"a.yaml": "a: 2\n"})
    text = str(info.value)
    assert "\n" not in text
    assert "pre-receive hook declined" in text
    assert "policy: main needs two approvals / see https://wiki.example/deploys" in text
    assert "remote was not changed" in text
    assert info.value.exit_code == 6
    assert tip(git_remote) == before
    assert git("--git-dir", str(git_remote), "count-objects", "-v") == objects_before


def test_a_push_to_a_checked_out_branch_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "nonbare"
    git("init", "--quiet", "-b", "main", str(work))
    git("commit", "--quiet", "--allow-empty", "-m", "start", cwd=work)
    with pytest.raises(RemoteError, match="currently checked out"):
        _write(work, {"a.yaml": "a\n"})


# The hook makes the branch move while our push waits for the ref: it commits on top of
# the tip (outside our path) and updates the ref before receive-pack can.
_INTERLOPER = """#!/bin/sh
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
{guard}
tip=$(git rev-parse refs/heads/main)
blob=$(date +%s%N | git hash-object -w --stdin)
export GIT_INDEX_FILE="$PWD/interloper-index"
git read-tree "$tip" && git update-index --add --cacheinfo "100644,$blob,interloper.txt"
tree=$(git write-tree) && rm -f "$GIT_INDEX_FILE"
commit=$(echo interloper | git commit-tree "$tree" -p "$tip")
git update-ref refs/heads/main "$commit" "$tip"
exit 0
"""


def test_a_branch_that_moved_once_is_fetched_and_written_again(git_remote: Path, tmp_path: Path) -> None:
    _write(git_remote, {"a.yaml": "a: 1\n"})
    marker = tmp_path / "moved-once"
    guard = f'[ -e "{marker}" ] && exit 0\ntouch "{marker}"'
    hook(git_remote, "pre-receive", _INTERLOPER.format(guard=guard))
    result = _write(git_remote, {"a.yaml": "a: 2\n"})
    assert result.changed and result.attempts == 2
    assert result.commit == tip(git_remote)
    assert git("--git-dir", str(git_remote), "log", "-1", "--format=%s", "main^") == "interloper"
    names = git("--git-dir", str(git_remote), "ls-tree", "-r", "--name-only", "main").splitlines()
    assert names == ["clusters/tiny/a.yaml", "interloper.txt"]


def test_a_branch_that_keeps_moving_gives_up_after_max_attempts(git_remote: Path) -> None:
    _write(git_remote, {"a.yaml": "a: 1\n"})
    hook(git_remote, "pre-receive", _INTERLOPER.format(guard=""))
    with pytest.raises(RemoteError, match=r"main of .* kept moving: 3 pushes") as info:
        _write(git_remote, {"a.yaml": "a: 2\n"}, max_attempts=3)
    assert "retry" in str(info.value)
    assert git("--git-dir", str(git_remote), "show", "main:clusters/tiny/a.yaml") == "a: 1"


def test_identity_falls_back_to_trainops_on_a_machine_without_one(
    git_remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for role in ("AUTHOR", "COMMITTER"):
        for part in ("NAME", "EMAIL"):
            monkeypatch.delenv(f"GIT_{role}_{part}")
    monkeypatch.delenv("EMAIL", raising=False)
    _write(git_remote, {"a.yaml": "a\n"})
    who = git("--git-dir", str(git_remote), "log", "-1", "--format=%an <%ae>|%cn <%ce>")
    assert who == "trainops <trainops@localhost>|trainops <trainops@localhost>"


def test_identity_from_git_config_then_from_the_author_given(
    git_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for role in ("AUTHOR", "COMMITTER"):
        for part in ("NAME", "EMAIL"):
            monkeypatch.delenv(f"GIT_{role}_{part}")
    config = tmp_path / "gitconfig"
    config.write_text("[user]\n\tname = Dana Ops\n\temail = dana@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    _write(git_remote, {"a.yaml": "a\n"})
    who = git("--git-dir", str(git_remote), "log", "-1", "--format=%an <%ae>|%cn <%ce>")
    assert who == "Dana Ops <dana@example.com>|Dana Ops <dana@example.com>"
    _write(git_remote, {"a.yaml": "b\n"}, author=("CI Bot", "ci@example.com"))
    who = git("--git-dir", str(git_remote), "log", "-1", "--format=%an <%ae>|%cn <%ce>")
    assert who == "CI Bot <ci@example.com>|CI Bot <ci@example.com>"


def test_git_variables_of_a_surrounding_hook_do_not_redirect_the_write(
    git_remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    git("init", "--quiet", "-b", "main", str(victim))
    git("commit", "--quiet", "--allow-empty", "-m", "mine", cwd=victim)
    index = victim / ".git" / "index"
    state = (
        git("for-each-ref", cwd=victim),
        git("count-objects", "-v", cwd=victim),
        index.exists() and index.read_bytes(),
    )
    monkeypatch.setenv("GIT_DIR", str(victim / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(victim))
    monkeypatch.setenv("GIT_INDEX_FILE", str(victim / ".git" / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(victim / ".git" / "objects"))
    result = _write(git_remote, {"a.yaml": "a\n"})
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name)
    assert result.commit == tip(git_remote)
    assert (
        git("for-each-ref", cwd=victim),
        git("count-objects", "-v", cwd=victim),
        index.exists() and index.read_bytes(),
    ) == state
    assert list(victim.iterdir()) == [victim / ".git"]


@pytest.mark.parametrize("branch", ["bad..name", "-x", "a b", "x.lock", ""])
def test_invalid_branch_names_are_refused(tmp_path: Path, branch: str) -> None:
    with pytest.raises(InputError, match="not a valid branch name"):
        _write(tmp_path / "new.git", {"a": "a"}, branch=branch, create=True)
    assert not (tmp_path / "new.git").exists()


@pytest.mark.parametrize(
    "trailers", [{"Bad Key": "x"}, {"Trainops-Run": "two\nlines"}, {"Trainops-Run": " padded"}, {"Trainops-Run": ""}]
)
def test_malformed_trailers_are_refused(tmp_path: Path, trailers: dict[str, str]) -> None:
    with pytest.raises(InputError, match="trailer"):
        _write(tmp_path / "new.git", {"a": "a"}, trailers=trailers, create=True)


def test_trailers_join_a_trailer_block_the_message_ends_with(git_remote: Path) -> None:
    message = "deploy\n\nbody\n\nSigned-off-by: Dana <dana@example.com>"
    _write(git_remote, {"a": "a"}, message=message, trailers={"Trainops-Run": "r-2"})
    body = git("--git-dir", str(git_remote), "log", "-1", "--format=%B", "main")
    assert body.endswith("Signed-off-by: Dana <dana@example.com>\nTrainops-Run: r-2")
    (entry,) = history(repo=str(git_remote), branch="main")
    assert entry.trailers == {"Signed-off-by": "Dana <dana@example.com>", "Trainops-Run": "r-2"}


def test_a_patch_divider_in_the_message_is_refused(git_remote: Path) -> None:
    with pytest.raises(InputError, match="would not find the trailers"):
        _write(git_remote, {"a": "a"}, message="deploy\n\n---\nsummary")
    assert tip(git_remote) is None


def test_no_trailers_and_a_clean_message(git_remote: Path) -> None:
    _write(git_remote, {"a": "a"}, message="  deploy   \n\n  body line  \n\n", trailers=None)
    body = git("--git-dir", str(git_remote), "log", "-1", "--format=%B", "main")
    assert body == "deploy\n\n  body line"


def test_empty_message_and_bad_arguments_are_refused(git_remote: Path) -> None:
    with pytest.raises(InputError, match="commit message is empty"):
        _write(git_remote, {"a": "a"}, message=" \n ")
    with pytest.raises(InputError, match="max_attempts"):
        _write(git_remote, {"a": "a"}, max_attempts=0)
    with pytest.raises(InputError, match="author"):
        _write(git_remote, {"a": "a"}, author=("x", "<bad>"))
    with pytest.raises(InputError, match="must be str or bytes"):
        _write(git_remote, {"a": 3})
    assert tip(git_remote) is None


def test_a_push_the_remote_aborts_midway_is_reported_with_its_reason(git_remote: Path) -> None:
    _write(git_remote, {"a.yaml": "a: 1\n"})
    before = tip(git_remote)
    script = '#!/bin/sh\n[ "$1" = prepared ] && { echo "quota exceeded (simulated)" >&2; exit 1; }\nexit 0\n'
    hook(git_remote, "reference-transaction", script)
    with pytest.raises(RemoteError) as info:
        _write(git_remote, {"a.yaml": "a: 2\n"})
    text = str(info.value)
    assert "\n" not in text and "ref updates aborted by hook" in text and "quota exceeded (simulated)" in text
    assert "git ls-remote" in text
    (git_remote / "hooks" / "reference-transaction").unlink()
    assert tip(git_remote) == before


def test_executable_files_get_mode_755_and_a_mode_change_is_a_change(git_remote: Path, tmp_path: Path) -> None:
    files = {"sbatch.sh": "#!/bin/bash\necho hi\n", "job.yaml": "kind: Job\n"}
    first = _write(git_remote, files, executable=["sbatch.sh"])
    modes = subprocess.run(
        ["git", "--git-dir", str(git_remote), "ls-tree", "-r", "main"], capture_output=True, text=True, check=True
    ).stdout
    assert "100755 blob" in next(line for line in modes.splitlines() if line.endswith("clusters/tiny/sbatch.sh"))
    assert "100644 blob" in next(line for line in modes.splitlines() if line.endswith("clusters/tiny/job.yaml"))
    work = clone(git_remote, tmp_path / "work")
    assert (work / "clusters/tiny/sbatch.sh").stat().st_mode & 0o111
    assert _write(git_remote, files, executable=["sbatch.sh"]).changed is False
    again = _write(git_remote, files)  # the same bytes, no longer executable
    assert again.changed and again.commit != first.commit
    with pytest.raises(InputError, match="not among the files"):
        _write(git_remote, files, executable=["missing.sh"])
