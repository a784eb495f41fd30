"""The documentation site builds with `mkdocs build --strict` (every internal link and anchor
resolves, every page is in the nav, every included snippet exists), and no page cites an
issue number: the docs are written for readers, not as a development log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what the site is built from: its pages and the files they include (pymdownx.snippets)
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::[\w-]+)?"$', re.MULTILINE)
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<!\w)#\d+\b", re.IGNORECASE)


def _pages() -> list[Path]:
    return sorted((REPO / "docs").rglob("*.md"))


def _sources() -> list[Path]:
    """The pages, the files they include, and the README (the front door)."""
    found = {REPO / "README.md", *_pages()}
    for page in _pages():
        found.update(REPO / name for name in SNIPPET.findall(page.read_text(encoding="utf-8")))
    return sorted(found)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.fail("mkdocs and mkdocs-material are needed: pip install -e '.[docs]' (scripts/run-tests.sh does)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [_located(line) for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems or [done.stderr])
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def _located(warning: str) -> str:
    """mkdocs' warning about a link, prefixed with the page's path and the line of the link."""
    found = re.search(r"Doc file '([^']+)' contains (?:a link|an absolute link|a link to) '([^']+)'", warning)
    if not found:
        return warning
    page, target = REPO / "docs" / found.group(1), found.group(2)
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if f"]({target})" in line or f"({target} " in line:
            return f"docs/{found.group(1)}:{number}: {warning.split(' - ', 1)[-1].strip()}"
    return f"docs/{found.group(1)}: {warning.split(' - ', 1)[-1].strip()}"


def test_a_broken_link_is_reported_at_its_line(tmp_path: Path) -> None:
    page = REPO / "docs" / "index.md"
    number = next(n for n, line in enumerate(page.read_text().splitlines(), 1) if "](getting-started/" in line)
    target = re.search(r"\]\((getting-started/[^)]+)\)", page.read_text().splitlines()[number - 1])
    assert target
    warning = f"WARNING -  Doc file 'index.md' contains a link '{target.group(1)}', but the target is not found."
    assert _located(warning).startswith(f"docs/index.md:{number}: Doc file 'index.md'")


@pytest.mark.parametrize("source", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_cites_an_issue_number(source: Path) -> None:
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        found = ISSUE.search(line)
        assert not found, f"{source.relative_to(REPO)}:{number}: cites {found.group(0)!r}; say what holds instead"


def test_the_issue_finder_finds_citations() -> None:
    for cited in ("(issue 13)", "re-measured for issue 9", "see issue #27", "Issues 3 and 4", "fixed in #12"):
        assert ISSUE.search(cited), cited
    for plain in ("an issue with the registry", "step-30", "the 2nd run", "sha256:12", "PKCS#11"):
        assert not ISSUE.search(plain), plain


def test_every_page_is_in_the_nav() -> None:
    """mkdocs only warns (strict: fails) on omitted files when told to; check the config says so."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+omitted_files: warn$", config, re.MULTILINE)
    assert re.search(r"^strict: true$", config, re.MULTILINE)
