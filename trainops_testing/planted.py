"""Planted secrets: values the tests hand to trainops as credentials, then look for everywhere.

A test that gives trainops a secret (a registry password, a build secret, a token in a git
URL, HF_TOKEN) takes it from ``secret(name)``: a value unique to this session, so it can
appear in no file of the repository. Files that hold a secret because the test wrote it
there on purpose (Docker's config.json, a manifest with a credentialed URL, a `.env` the
build must leave out) are declared with ``source(path)``. The last test of the suite
(tests/leaks, marked after_all) scans every file the session wrote — rendered trees, image
layers and configs, artifacts, registry storage, logs, git objects — and fails on any
planted value found outside a declared source.

When the suite runs in several processes (pytest-xdist workers, scripts/run-tests.sh), each
process plants values of its own: each writes them, with its declared sources, to a record in
its temporary directory when it ends (``record``), and the scan, run once every worker has
ended, reads every record under the run's root (``recorded``).
"""

from __future__ import annotations

import json
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


RECORD = "planted-secrets.json"  # a declared source itself: it holds the values on purpose


def record(directory: Path) -> Path | None:
    """Write this process's planted values and declared sources to ``directory/RECORD``
    (nothing when it planted none)."""
    if not _PLANTED:
        return None
    path = Path(directory) / RECORD
    path.write_text(json.dumps({"secrets": _PLANTED, "sources": sorted(str(p) for p in _SOURCES)}))
    return path


def recorded(root: Path) -> tuple[dict[str, str], set[Path]]:
    """Every value planted by this process or by a process that recorded under ``root`` (in
    root itself, or in a worker's directory just below it), each named ``NAME`` or
    ``NAME@DIR`` (DIR: the recording process's directory, as values differ per process), and
    every declared source, records included."""
    values = dict(_PLANTED)
    sources = set(_SOURCES)
    root = Path(root)
    for path in sorted([*root.glob(RECORD), *root.glob(f"*/{RECORD}")]):  # not a walk: the scan walks
        data = json.loads(path.read_text())
        values.update({f"{name}@{path.parent.name}": value for name, value in data["secrets"].items()})
        sources.update(Path(p) for p in data["sources"])
        sources.add(path.resolve())
    return values, sources
