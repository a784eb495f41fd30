"""Planted secrets: values the tests hand to trainops as credentials, then look for everywhere.

A test that gives trainops a secret (a registry password, a build secret, a token in a git
URL, HF_TOKEN) takes it from ``secret(name)``: a value unique to this session, so it can
appear in no file of the repository. Files that hold a secret because the test wrote it
there on purpose (Docker's config.json, a manifest with a credentialed URL, a `.env` the
build must leave out) are declared with ``source(path)``. The last test of the suite
(tests/leaks, marked after_all) scans every file the session wrote — rendered trees, image
layers and configs, artifacts, registry storage, logs, git objects — and fails on any
planted value found outside a declared source.
"""

from __future__ import annotations

import secrets as _random
from pathlib import Path

_PLANTED: dict[str, str] = {}
_SOURCES: set[Path] = set()


def secret(name: str) -> str:
    """The session's planted value for name (the same value every time it is asked for)."""
    if name not in _PLANTED:
        _PLANTED[name] = f"planted-{name}-{_random.token_hex(12)}"
    return _PLANTED[name]


def source(path: Path) -> Path:
    """Declare a file that holds a planted secret on purpose (a credential store, an input)."""
    _SOURCES.add(Path(path).resolve())
    return path


def planted() -> dict[str, str]:
    return dict(_PLANTED)


def sources() -> set[Path]:
    return set(_SOURCES)
