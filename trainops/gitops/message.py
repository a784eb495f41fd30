"""Commit messages with machine-readable trailers, and the identity that signs them.

Trailers are added with ``git interpret-trailers`` itself (at the end, merged into a
trailer block the message may already end with, ``---`` lines in the body left alone),
and the result is read back with ``git interpret-trailers --parse`` before anything is
committed: what trainops writes is exactly what git tools and ``history`` read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from trainops.errors import InputError, TrainopsError
from trainops.gitops.scratch import Scratch

FALLBACK_NAME = "trainops"
FALLBACK_EMAIL = "trainops@localhost"
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_DIVIDER = re.compile(r"^---(\s|$)")
_IDENT = re.compile(r"^(?P<name>.*) <(?P<email>[^<>]*)> \d+ [+-]\d{4}$")
# the separator trainops writes and reads, whatever trailer.separators a user configured
SEPARATORS = ("-c", "trailer.separators=:")


def check_message(message: str) -> str:
    if not isinstance(message, str) or not message.strip():
        raise InputError("commit message is empty", hint="give a subject line saying what this commit deploys")
    if "\0" in message:
        raise InputError("commit message contains a NUL character")
    lines = [line.rstrip() for line in message.strip().splitlines()]
    divider = next((line for line in lines if _DIVIDER.match(line)), None)
    if divider is not None:
        raise InputError(
            f"commit message has a line {divider!r}: git reads a line starting with '---' as the start of a patch, "
            "so `git interpret-trailers --parse` would not find the trailers",
            hint="reword that line (indent it, or use another separator)",
        )
    return "\n".join(lines) + "\n"


def check_trailers(trailers: Mapping[str, str] | None) -> list[tuple[str, str]]:
    pairs = []
    for key, value in (trailers or {}).items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise InputError(
                f"trailer key {key!r} is not a git trailer token",
                hint="use letters, digits and '-', such as Trainops-Pipeline",
            )
        if not isinstance(value, str) or not value.strip() or value != value.strip() or "\n" in value or "\r" in value:
            raise InputError(
                f"trailer {key} has value {value!r}", hint="a trailer value is one non-empty line without outer spaces"
            )
        pairs.append((key, value))
    return pairs


def check_author(author: tuple[str, str] | None) -> tuple[str, str] | None:
    if author is None:
        return None
    if not isinstance(author, tuple) or len(author) != 2 or not all(isinstance(a, str) for a in author):
        raise InputError(f"author must be (name, email), not {author!r}")
    name, email = author
    for part, label in ((name, "name"), (email, "email")):
        if not part.strip() or any(c in part for c in "<>\n\r\0"):
            raise InputError(f"author {label} {part!r} is empty or contains <, > or a newline")
    return name.strip(), email.strip()


def compose(scratch: Scratch, message: str, trailers: list[tuple[str, str]]) -> Path:
    """A file holding the full commit message: ``message`` followed by ``trailers``."""
    body = scratch.write_temp(message.encode("utf-8"))
    if not trailers:
        return body
    args = [*SEPARATORS, "interpret-trailers", "--no-divider", "--where", "end", "--if-exists", "add"]
    args += ["--if-missing", "add"]
    for key, value in trailers:
        args += ["--trailer", f"{key}: {value}"]
    text = scratch.run(*args, str(body), what="add the commit trailers").stdout
    result = scratch.write_temp(text)
    parsed = parse_lines(scratch.run(*SEPARATORS, "interpret-trailers", "--parse", str(result), what="parse").text)
    missing = [f"{k}: {v}" for k, v in trailers if parsed.get(k) != v]
    if missing:
        raise TrainopsError(
            f"git did not keep the trailers {', '.join(missing)}",
            hint="check trailer.* settings in your git config",
        )
    return result


def parse_lines(text: str) -> dict[str, str]:
    """``Key: value`` lines (as ``interpret-trailers --parse`` prints them) as a dict.

    A key given twice keeps its last value.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and _KEY.match(key.strip()):
            out[key.strip()] = value.strip()
    return out


def identity(scratch: Scratch, author: tuple[str, str] | None) -> dict[str, str]:
    """``GIT_AUTHOR_*``/``GIT_COMMITTER_*`` for the commit.

    The author given is used for both; else each is git's configured identity (config or
    environment, never a guess from the host name); else ``trainops <trainops@localhost>``,
    so that a fresh CI machine with no git identity still commits.
    """
    env: dict[str, str] = {}
    for role in ("AUTHOR", "COMMITTER"):
        if author is not None:
            name, email = author
        else:
            out = scratch.run("-c", "user.useConfigOnly=true", "var", f"GIT_{role}_IDENT", what="", check=False)
            match = _IDENT.match(out.text) if out.status == 0 else None
            if match and match.group("name").strip() and match.group("email").strip():
                name, email = match.group("name"), match.group("email")
            else:
                name, email = FALLBACK_NAME, FALLBACK_EMAIL
        env[f"GIT_{role}_NAME"] = name
        env[f"GIT_{role}_EMAIL"] = email
    return env
