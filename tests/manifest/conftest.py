"""Fixtures of the manifest tests: the YAML parser to run, manifests written in tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

# The first four lines of every manifest written by `manifest`; bodies start at line 5.
HEADER = "apiVersion: trainops.dev/v1alpha1\nkind: Pipeline\nmetadata:\n  name: demo\n"


@pytest.fixture(params=["libyaml", "pure-python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with PyYAML's C parser and again with its pure-Python one.

    The loader uses libyaml when PyYAML has it; an installation without it must be just as
    safe, so hostile-input tests run on both.
    """
    if request.param == "libyaml":
        if not getattr(yaml, "__with_libyaml__", False):
            pytest.skip("this PyYAML was built without libyaml")
    else:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    yield str(request.param)


@pytest.fixture
def manifest(tmp_path: Path) -> Callable[[str], Path]:
    """Write HEADER + body (or body alone when it starts with apiVersion) to a fresh file."""
    count = 0

    def write(body: str) -> Path:
        nonlocal count
        count += 1
        path = tmp_path / f"m{count}.yaml"
        text = body if body.startswith("apiVersion") else HEADER + body
        path.write_text(text, encoding="utf-8")
        return path

    return write
