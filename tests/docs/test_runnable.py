"""Every shell block the guides mark runnable (`<!-- runnable: … -->` on the line before a
```sh fence) runs as written, in an empty directory, with this checkout's trainops on the
PATH and a HOME of its own: `bash -euo pipefail`, so any failing line fails the test, which
names the page and line. The set is small and fast by design: blocks that need services or
a cluster are shown, not marked. (The README's first-day block has its own test,
tests/cli/test_first_day.py.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_first_day import _environment

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- runnable"


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if line.startswith(MARKER):
                where = f"{page.relative_to(REPO)}:{number}"
                fence = lines[number] if number < len(lines) else ""
                assert fence == "```sh", f"{where}: the marker must precede a ```sh fence"
                end = lines.index("```", number + 1)
                found.append((where, "\n".join(lines[number + 1 : end]) + "\n"))
    return found


BLOCKS = _blocks()


def test_the_guides_mark_some_blocks_runnable() -> None:
    assert len(BLOCKS) >= 3, BLOCKS
    pages = {where.rsplit(":", 1)[0] for where, _ in BLOCKS}
    assert "docs/getting-started/to-a-cluster.md" in pages


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_a_runnable_block_runs_as_written(where: str, block: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=work,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{where}: the block failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr}"


def test_the_marker_is_spelled_one_way() -> None:
    for page in (REPO / "docs").rglob("*.md"):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"<!--\s*runnable", line, re.IGNORECASE):
                assert line.startswith(MARKER), f"{page.relative_to(REPO)}:{number}: write '{MARKER}: …' at line start"
