"""`registry ls`: tag names from the listing alone, details with -l."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.registry.conftest import make_tree
from trainops_testing.cli import run


def test_ls_names_the_tags_and_long_reads_what_they_hold(tmp_path: Path) -> None:
    registry = f"file://{tmp_path / 'registry'}"
    make_tree(tmp_path / "ckpt", {"model.safetensors": b"a" * 3000})
    for step in (2, 10, 1):
        pushed = run("push", str(tmp_path / "ckpt"), f"{registry}/p/ckpt:step-{step}", "--kind", "checkpoint")
        assert pushed.code == 0, pushed.stderr
    names = run("registry", "ls", f"{registry}/p/ckpt")
    assert names.code == 0, names.stderr
    assert sorted(names.stdout.split()) == ["step-1", "step-10", "step-2"]  # (the order is another test's)
    long = run("registry", "ls", "-l", f"{registry}/p/ckpt")
    assert long.code == 0 and "checkpoint" in long.stdout and "2.9 KiB" in long.stdout
    data = json.loads(run("registry", "ls", "--long", f"{registry}/p/ckpt", "-o", "json").stdout)
    assert {t["kind"] for t in data["tags"]} == {"checkpoint"}
    assert len({t["digest"] for t in data["tags"]}) == 1  # the same content under three tags


def test_listing_names_and_pulling_load_no_pydantic(tmp_path: Path) -> None:
    """Neither needs validation, so neither pays for importing it (pydantic is the biggest import)."""
    registry = f"file://{tmp_path / 'registry'}"
    make_tree(tmp_path / "ckpt", {"model.safetensors": b"a" * 30})
    assert run("push", str(tmp_path / "ckpt"), f"{registry}/p/ckpt:1").code == 0
    probe = (
        "import contextlib, io, json, sys\n"
        "from trainops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['registry', 'ls', '{registry}/p/ckpt']) == 0\n"
        f"    assert main(['pull', '{registry}/p/ckpt:1', '{tmp_path / 'out'}']) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core'))\n"
        "print(json.dumps(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"a" * 30
