"""Paths inside the GitOps repository: checked before anything is written.

A path is relative, normalized and stays inside the repository: no leading ``/``, no
empty, ``.`` or ``..`` segments, no ``.git`` segment, no backslash or control character.
Paths are compared byte for byte with what git stores, so anything git would rewrite
or refuse is refused here first, with the offending value in the message.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainops.errors import InputError

_BAD_SEGMENTS = {"", ".", ".."}


def _problem(value: str) -> str | None:
    if not value:
        return "is empty"
    if value.startswith("/"):
        return "is absolute"
    if "\\" in value:
        return "contains a backslash"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "contains a control character"
    segments = value.split("/")
    if ".." in segments:
        return "contains '..'"
    if any(s in _BAD_SEGMENTS for s in segments):
        return "is not normalized (empty or '.' segment)"
    if any(s.lower() == ".git" for s in segments):
        return "contains a .git segment"
    return None


def check_directory(path: str) -> str:
    """The GitOps directory trainops owns, normalized (one trailing ``/`` is dropped)."""
    if not isinstance(path, str):
        raise InputError(f"gitops path must be a string, not {type(path).__name__}")
    value = path[:-1] if path.endswith("/") and path != "/" else path
    problem = _problem(value)
    if problem:
        raise InputError(
            f"gitops path {path!r} {problem}",
            hint="give a relative directory inside the repository, such as clusters/default",
        )
    return value


def check_files(directory: str, files: Mapping[str, str | bytes]) -> dict[str, bytes]:
    """``{repo-relative path: content}`` for files given relative to ``directory``.

    Each name is checked like a directory path; a name that is both a file and the parent
    of another (``a`` and ``a/b``) is refused, since git cannot store both.
    """
    out: dict[str, bytes] = {}
    for name, content in files.items():
        if not isinstance(name, str):
            raise InputError(f"file name {name!r} under {directory} must be a string")
        problem = _problem(name)
        if problem:
            raise InputError(
                f"file name {name!r} under {directory} {problem}",
                hint="file names are relative to the gitops path and must stay inside it",
            )
        if isinstance(content, str):
            data = content.encode("utf-8")
        elif isinstance(content, (bytes, bytearray, memoryview)):
            data = bytes(content)
        else:
            raise InputError(f"content of {name!r} must be str or bytes, not {type(content).__name__}")
        out[f"{directory}/{name}"] = data
    for full in out:
        parent = full.rpartition("/")[0]
        while parent != directory and parent:
            if parent in out:
                raise InputError(
                    f"{parent} is given both as a file and as the directory of {full}",
                    hint="rename one of them",
                )
            parent = parent.rpartition("/")[0]
    return out
