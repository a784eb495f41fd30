"""The build context: selection (include, exclude, .dockerignore), reproducible tars, secret checks."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.image.helpers import write_tree
from trainops.errors import InputError, NotFoundError
from trainops.image.context import (
    PORTABLE_MTIME,
    HashingWriter,
    PatternSet,
    hash_entries,
    members_of,
    select_context,
    write_tar,
)
from trainops.image.secrets import check_not_baked
from trainops.manifest.stages import BuildSecret

PROJECT: dict[str, str | bytes] = {
    "pkg/__init__.py": "",
    "pkg/train.py": "print('train')\n",
    "pkg/__pycache__/train.cpython-311.pyc": b"\x00",
    "data/corpus.txt": "hello\n",
    "checkpoints/step-1/model.bin": b"\x01" * 10,
    "notes/draft.md": "draft\n",
    "notes/keep.md": "keep\n",
    "README.md": "# demo\n",
    ".env": "TOKEN=x\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    ".trainops/registry/oci-layout": "{}",
}


def _paths(root: Path, **kw: Any) -> list[str]:
    return [e.relpath for e in select_context(root, **kw).entries]


def test_everything_but_git_and_the_local_registry_by_default(tmp_path: Path) -> None:
    write_tree(tmp_path, PROJECT)
    assert _paths(tmp_path) == [
        ".env",
        "README.md",
        "checkpoints/step-1/model.bin",
        "data/corpus.txt",
        "notes/draft.md",
        "notes/keep.md",
        "pkg/__init__.py",
        "pkg/__pycache__/train.cpython-311.pyc",
        "pkg/train.py",
    ]


def test_dockerignore_rules(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            **PROJECT,
            ".dockerignore": "# comment\n\n**/__pycache__\ncheckpoints/\n/notes\n!notes/keep.md\n"
            ".env\n*.md\n!README.md\n",
        },
    )
    # "*.md" matches at the top only ("*" never crosses "/"), so the exception keeps notes/keep.md
    assert _paths(tmp_path) == [
        ".dockerignore",
        "README.md",
        "data/corpus.txt",
        "notes/keep.md",
        "pkg/__init__.py",
        "pkg/train.py",
    ]


def test_later_exception_re_includes_but_exclude_always_wins(tmp_path: Path) -> None:
    write_tree(tmp_path, {**PROJECT, ".dockerignore": "notes\n!notes/keep.md\n"})
    assert [p for p in _paths(tmp_path) if p.startswith("notes")] == ["notes/keep.md"]
    assert [p for p in _paths(tmp_path, exclude=["notes/*.md"]) if p.startswith("notes")] == []


def test_include_then_exclude(tmp_path: Path) -> None:
    write_tree(tmp_path, PROJECT)
    got = _paths(tmp_path, include=["pkg/**", "data/**", "README.md"], exclude=["**/__pycache__/**"])
    assert got == ["README.md", "data/corpus.txt", "pkg/__init__.py", "pkg/train.py"]


def test_the_manifests_example_globs(tmp_path: Path) -> None:
    """examples/tiny-llm: include ["tiny_llm/**", "data/**", "pyproject.toml"], exclude pycache and checkpoints."""
    write_tree(
        tmp_path,
        {
            "tiny_llm/model.py": "",
            "tiny_llm/__pycache__/model.pyc": b"",
            "data/corpus.txt": "",
            "pyproject.toml": "",
            "checkpoints/a.bin": b"",
            "trainops.yaml": "",
        },
    )
    got = _paths(
        tmp_path,
        include=["tiny_llm/**", "data/**", "pyproject.toml"],
        exclude=["**/__pycache__/**", "checkpoints/**"],
    )
    assert got == ["data/corpus.txt", "pyproject.toml", "tiny_llm/model.py"]


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("*.py", "a.py", True),
        ("*.py", "dir/a.py", False),
        ("**/*.py", "dir/sub/a.py", True),
        ("**/*.py", "a.py", True),
        ("dir", "dir/sub/a.py", True),  # a directory pattern covers what is inside
        ("dir/**", "dir/a", True),
        ("di?", "dir", True),
        ("[a-c].txt", "b.txt", True),
        ("[a-c].txt", "d.txt", False),
        ("a.b", "axb", False),  # a dot is literal
        ("/abs/x", "abs/x", True),  # a leading slash means the context root
        ("./x/../y", "y", True),  # patterns are cleaned
    ],
)
def test_pattern_semantics(pattern: str, path: str, hit: bool) -> None:
    assert PatternSet([pattern], "test").matches(path) is hit


def test_symlinks_are_kept_as_symlinks(tmp_path: Path) -> None:
    write_tree(tmp_path, {"real/file.txt": "x"})
    os.symlink("real/file.txt", tmp_path / "link.txt")
    os.symlink("real", tmp_path / "dirlink")
    entries = {e.relpath: e for e in select_context(tmp_path).entries}
    assert entries["link.txt"].kind == "symlink" and entries["link.txt"].linkname == "real/file.txt"
    assert entries["dirlink"].kind == "symlink"
    assert "dirlink/file.txt" not in entries


def test_missing_and_non_directory_contexts(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"does not exist; set image\.context"):
        select_context(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        select_context(tmp_path / "file")


def _tar(root: Path) -> bytes:
    selection = hash_entries(select_context(root))
    out = io.BytesIO()
    write_tar(members_of(selection, "workspace"), out)
    return out.getvalue()


def test_tars_are_reproducible_whatever_mtimes_owners_and_umask(tmp_path: Path) -> None:
    files = {"b/two.py": "2", "a/one.py": "1", "run.sh": "#!/bin/sh\n"}
    first, second = tmp_path / "first", tmp_path / "second" / "elsewhere"
    write_tree(first, files)
    write_tree(second, dict(reversed(list(files.items()))))
    os.chmod(first / "run.sh", 0o755)
    os.chmod(second / "run.sh", 0o700)  # a different umask; still "executable"
    os.chmod(second / "a" / "one.py", 0o600)
    os.utime(second / "b" / "two.py", (1, 1))
    assert _tar(first) == _tar(second)
    (second / "b" / "two.py").write_text("changed")
    assert _tar(first) != _tar(second)


def test_tar_layout(tmp_path: Path) -> None:
    write_tree(tmp_path, {"pkg/mod.py": "x = 1\n", "run.sh": "#!/bin/sh\n"})
    os.chmod(tmp_path / "run.sh", 0o755)
    with tarfile.open(fileobj=io.BytesIO(_tar(tmp_path))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["workspace", "workspace/pkg", "workspace/pkg/mod.py", "workspace/run.sh"]
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", PORTABLE_MTIME)
    assert {m.name: m.mode for m in members} == {
        "workspace": 0o755,
        "workspace/pkg": 0o755,
        "workspace/pkg/mod.py": 0o644,
        "workspace/run.sh": 0o755,
    }


def test_a_file_changed_after_hashing_is_refused(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": "one"})
    selection = hash_entries(select_context(tmp_path))
    (tmp_path / "a.py").write_text("two")  # same size, other content
    with pytest.raises(InputError, match="changed while the image was being built"):
        write_tar(members_of(selection, ""), HashingWriter())  # type: ignore[arg-type]


def test_a_secret_file_inside_the_context_is_refused(tmp_path: Path) -> None:
    write_tree(tmp_path, {"app.py": "", "secrets/token": "abc"})
    secret = BuildSecret.model_validate({"id": "token", "file": "secrets/token"})
    selection = select_context(tmp_path)
    with pytest.raises(InputError) as err:
        check_not_baked([secret], {}, tmp_path, selection)
    assert "its file secrets/token is inside the build context" in str(err.value)
    assert "add secrets/token to .dockerignore" in str(err.value)
    # excluded: fine
    check_not_baked([secret], {}, tmp_path, select_context(tmp_path, exclude=["secrets"]))


def test_a_context_file_holding_a_secret_value_is_refused(tmp_path: Path) -> None:
    write_tree(tmp_path, {"app.py": "", "notebook.ipynb": "token = 'hf_abcdefghijklmnop'\n"})
    secret = BuildSecret.model_validate({"id": "hf_token", "env": "HF_TOKEN"})
    with pytest.raises(InputError, match=r"notebook.ipynb contains the value of secret 'hf_token'"):
        check_not_baked([secret], {"hf_token": b"hf_abcdefghijklmnop"}, tmp_path, select_context(tmp_path))
    # short values match by chance: they are not searched for
    check_not_baked([secret], {"hf_token": b"abc"}, tmp_path, select_context(tmp_path))


def test_the_manifest_is_not_part_of_the_context_unless_included(tmp_path: Path) -> None:
    """Changing train.nodes in trainops.yaml must not make a new image."""
    write_tree(tmp_path, {"app.py": "", "trainops.yaml": "spec: {}\n", "sub/trainops.yaml": "x"})
    manifest = tmp_path / "trainops.yaml"
    assert _paths(tmp_path, manifest=manifest) == ["app.py", "sub/trainops.yaml"]
    assert _paths(tmp_path, include=["*.yaml", "app.py"], manifest=manifest) == ["app.py", "trainops.yaml"]


def test_tar_bytes_are_pinned(tmp_path: Path) -> None:
    """The layer format itself: this digest was checked identical on Python 3.10, 3.11, 3.12 and 3.13.

    If it changes, every layer-built image changes digest: that needs a new INPUTS_VERSION.
    """
    long_name = "l" * 150 + ".txt"  # needs a PAX header, as does the non-ASCII directory
    write_tree(tmp_path, {"pkg/a.py": "print(1)\n", "run.sh": "#!/bin/sh\necho hi\n", f"pkg/ünï/{long_name}": "x\n"})
    os.chmod(tmp_path / "run.sh", 0o755)
    os.symlink("pkg/a.py", tmp_path / "link")
    writer = HashingWriter()
    write_tar(members_of(hash_entries(select_context(tmp_path)), "workspace"), writer)  # type: ignore[arg-type]
    assert (writer.digest, writer.size) == (
        "sha256:6607d58a4f5eef6ecd77f7b1513ef54e0184021c437a72c85560f651269b47ce",
        10240,
    )


EQUIVALENCE_TREE = [
    "a.py",
    "b.txt",
    "Makefile",
    "src/app/main.py",
    "src/app/util.py",
    "src/app/__pycache__/main.cpython-311.pyc",
    "src/lib/x.c",
    "src/lib/deep/er/y.py",
    "docs/index.md",
    "docs/img/logo.png",
    "checkpoints/step-1/model.bin",
    "checkpoints/step-2/model.bin",
    "data/train/0001.jsonl",
    "data/eval/0001.jsonl",
    "notes/keep.md",
    "notes/draft.md",
]
EQUIVALENCE_PATTERNS = [
    "*.py",
    "**/*.py",
    "src",
    "src/**",
    "src/*/main.py",
    "!src/app/main.py",
    "checkpoints",
    "checkpoints/**",
    "!checkpoints/step-2",
    "data/*/0001.jsonl",
    "!data/eval",
    "**/__pycache__",
    "docs/",
    "/notes/draft.md",
    "notes",
    "!notes/keep.md",
    "?akefile",
    "[a-b].*",
    "src/lib/deep",
    "**",
    "!**/*.md",
    "./data/../docs/img",
]


def _pattern_sets() -> list[list[str]]:
    singles = [[p] for p in EQUIVALENCE_PATTERNS]
    pairs = [[a, b] for i, a in enumerate(EQUIVALENCE_PATTERNS) for b in EQUIVALENCE_PATTERNS[i + 1 :: 2]]
    return singles + pairs


def _tree_order(paths: object) -> list[str]:
    return sorted((p for p in paths if p in EQUIVALENCE_TREE), key=lambda p: p.split("/"))  # type: ignore[attr-defined]


def test_the_pruned_walk_selects_what_docker_py_selects(tmp_path: Path) -> None:
    """.dockerignore semantics are docker-py's: the context is what PatternMatcher.walk keeps
    (it skips an ignored directory unless an exception reaches into it), and image.include
    keeps the files PatternMatcher.matches names. Our one helper on top, the walk pruning
    directories no include can reach, must change nothing, on every pattern set."""
    from docker.utils.build import PatternMatcher

    write_tree(tmp_path, dict.fromkeys(EQUIVALENCE_TREE, ""))
    sets = _pattern_sets()
    assert len(sets) > 140
    for patterns in sets:
        assert _paths(tmp_path, exclude=patterns) == _tree_order(set(PatternMatcher(patterns).walk(str(tmp_path)))), (
            patterns
        )
        positive = [p for p in patterns if not p.startswith("!")]
        if not positive:
            continue  # no include pattern: everything
        keep = PatternMatcher(positive)
        assert _paths(tmp_path, include=positive) == _tree_order(f for f in EQUIVALENCE_TREE if keep.matches(f)), (
            positive
        )
