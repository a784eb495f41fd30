"""Repository URLs: accepted forms, and credentials that never reach a message or result."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.errors import InputError, RemoteError, TrainopsError
from trainops.gitops import history, write_tree
from trainops.gitops.remote import parse_remote, redact_url
from trainops.gitops.scratch import one_line, reason
from trainops_testing import planted


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:secret@host/org/repo.git", "https://host/org/repo.git"),
        ("https://ghp_0123456789abcdef@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("http://a%40b:p%3Ass@host:8080/r.git", "http://host:8080/r.git"),
        ("ssh://git:secret@host:2222/org/repo.git", "ssh://git@host:2222/org/repo.git"),
        ("ssh://git@host/org/repo.git", "ssh://git@host/org/repo.git"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("https://host/org/repo.git", "https://host/org/repo.git"),
    ],
)
def test_redaction(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert parse_remote(url).display == shown


def test_local_forms() -> None:
    assert parse_remote("/srv/gitops.git").local == Path("/srv/gitops.git")
    assert parse_remote("file:///srv/git%20ops.git").local == Path("/srv/git ops.git")
    assert parse_remote("file://localhost/srv/gitops.git").local == Path("/srv/gitops.git")
    assert parse_remote("https://host/r.git").local is None
    assert parse_remote("host.example:org/r.git").local is None


@pytest.mark.parametrize(
    "url",
    [
        "file://.trainops/gitops.git",  # relative: the caller resolves it
        ".trainops/gitops.git",
        "gitops.git",
        "ext::sh -c touch% /tmp/pwned",
        "fd::3",
        "-uhack",
        "ftp://host/r.git",
        " /srv/gitops.git",
        "",
    ],
)
def test_refused_forms(url: str) -> None:
    with pytest.raises(InputError):
        parse_remote(url)


def test_a_secret_in_the_url_never_reaches_an_error() -> None:
    password = planted.secret("git-password")
    url = f"https://user:{password}@127.0.0.1:1/org/repo.git"  # nothing listens on port 1
    with pytest.raises(RemoteError) as info:
        write_tree(repo=url, branch="main", path="clusters/a", files={"a": "a"}, message="deploy")
    text = str(info.value)
    assert password not in text and "user:" not in text
    assert "https://127.0.0.1:1/org/repo.git" in text
    with pytest.raises(TrainopsError) as info2:
        history(repo=url, branch="main")
    assert password not in str(info2.value)


def test_a_token_user_name_never_reaches_an_error() -> None:
    url = "https://ghp_tokenvalue0123456789@127.0.0.1:1/org/repo.git"
    with pytest.raises(RemoteError) as info:
        write_tree(repo=url, branch="main", path="clusters/a", files={"a": "a"}, message="deploy")
    assert "ghp_tokenvalue" not in str(info.value)


def test_scrub_removes_credentials_from_any_text() -> None:
    remote = parse_remote("https://bot:pa%24%24word@host/r.git")
    text = "fatal: unable to access 'https://bot:pa%24%24word@host/r.git/': pa$$word rejected"
    assert remote.scrub(text) == "fatal: unable to access 'https://host/r.git/': *** rejected"


def test_git_reasons_are_one_useful_line() -> None:
    ssh = (
        "ssh: connect to host gitops.example port 22: Connection refused\n"
        "fatal: Could not read from remote repository.\n\n"
        "Please make sure you have the correct access rights\nand the repository exists.\n"
    )
    assert reason(ssh) == "ssh: connect to host gitops.example port 22: Connection refused"
    github = "ERROR: Repository not found.\nfatal: Could not read from remote repository.\n"
    assert reason(github) == "Repository not found."
    assert reason("warning: x\nfatal: unable to access 'https://h/r.git/': timeout\n") == (
        "unable to access 'https://h/r.git/': timeout"
    )
    assert one_line("a\n  b\tc") == "a b c" and len(one_line("x" * 1000)) == 400
