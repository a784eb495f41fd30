"""The reference is generated from the code (scripts/gen_docs.py) and current: a stale
page, a command or option without an entry, an environment variable trainops reads but the
reference does not name, or a help URL that leads nowhere fails here, naming the file."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from trainops import DOCS_URL
from trainops.cli.docs import reference_anchor, reference_page
from trainops.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "regenerate with: python scripts/gen_docs.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


GEN = _generator()
COMMANDS = list(GEN._walk(cli))


def test_every_generated_page_is_current() -> None:
    assert GEN.stale() == [], f"stale: {', '.join(GEN.stale())}; {REGENERATE}"


def _section(path: tuple[str, ...]) -> tuple[Path, str]:
    page = REPO / "docs" / (reference_page(path).rstrip("/") + ".md" if path else "reference/cli/index.md")
    assert page.is_file(), f"{page.relative_to(REPO)} is missing: trainops {' '.join(path)} has no page; {REGENERATE}"
    text = page.read_text()
    anchor = "{#" + reference_anchor(path) + "}"
    assert anchor in text, f"{page.relative_to(REPO)}: no entry for trainops {' '.join(path)}; {REGENERATE}"
    return page, text.split(anchor, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "trainops" for p, _ in COMMANDS])
def test_every_command_and_option_has_an_entry(path: tuple[str, ...], command: click.Command) -> None:
    page, section = _section(path)
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            for flag in (*param.opts, *param.secondary_opts):
                where = f"{page.relative_to(REPO)}: trainops {' '.join(path)} {flag}"
                assert f"`{flag}`" in section, f"{where} has no entry"
        if isinstance(param, click.Argument) and path:
            metavar = (param.metavar or param.human_readable_name.upper()).replace("|", "\\|")
            assert f"`{metavar}`" in section, f"{page.relative_to(REPO)}: argument {metavar} has no entry"


def test_help_ends_with_the_address_of_the_entry() -> None:
    from click.testing import CliRunner

    for path, _ in COMMANDS:
        shown = CliRunner().invoke(cli, [*path, "--help"], terminal_width=60)
        url = f"{DOCS_URL}{reference_page(path)}#{reference_anchor(path)}"
        assert shown.output.rstrip().endswith(f"Reference: {url}"), (path, shown.output[-200:])


def test_one_docs_url() -> None:
    config = (REPO / "mkdocs.yml").read_text()
    assert re.search(rf"^site_url: {re.escape(DOCS_URL)}$", config, re.MULTILINE), "mkdocs.yml site_url != DOCS_URL"


def test_every_environment_variable_is_in_the_reference() -> None:
    used: dict[str, str] = {}
    for root in ("trainops", "templates"):
        for path in (REPO / root).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".j2", ".sh", ".yml", ".yaml"):
                for name in re.findall(r"\b(TRAINOPS_[A-Z][A-Z0-9_]*)\b", path.read_text(errors="replace")):
                    used.setdefault(name, str(path.relative_to(REPO)))
    page = (REPO / "docs" / "reference" / "environment.md").read_text()
    missing = {name: where for name, where in used.items() if f"`{name}`" not in page}
    assert not missing, f"docs/reference/environment.md lacks {missing}: add them to scripts/gen_docs.py"


def test_the_shape_of_every_data_command_is_read_from_the_code() -> None:
    unread = [
        " ".join(path)
        for path, command in COMMANDS
        if any("--output" in getattr(p, "opts", ()) for p in command.params) and GEN.json_shape(command) is None
    ]
    assert unread == [], f"-o json shape not found for {unread}: scripts/gen_docs.py cannot read what they print"


def test_every_results_file_is_whole_and_shown() -> None:
    """docs/operations/results/*.json: the keys bench/harness/docresult.py writes, a cell per
    column, and each shown by an operations page (and each page's region has its file)."""
    import json

    keys = ("benchmark", "title", "command", "machine", "load", "date", "columns", "rows")
    results = REPO / "docs" / "operations" / "results"
    files = sorted(results.glob("*.json"))
    assert files
    for path in files:
        doc = json.loads(path.read_text())
        where = str(path.relative_to(REPO))
        assert tuple(doc) == keys, f"{where}: keys {tuple(doc)}, expected {keys}"
        assert doc["benchmark"] == path.stem, where
        assert all(isinstance(doc[k], str) and doc[k] for k in ("title", "command", "machine", "load")), where
        assert doc["date"] is None or re.match(r"^\d{4}-\d\d-\d\d", doc["date"]), where
        assert doc["command"].startswith(f"python bench/{path.stem}.py"), f"{where}: {doc['command']}"
        assert all(len(row) == len(doc["columns"]) for row in doc["rows"]), f"{where}: a row without a cell per column"
        script = (REPO / "bench" / f"{path.stem}.py").read_text()
        assert '"--doc"' in script and "docresult.write(" in script, f"bench/{path.stem}.py cannot refresh {where}"
    assert GEN.results_used() == {p.stem for p in files}, "every results file is shown on an operations page"


def test_every_command_has_a_guide() -> None:
    """Each top-level command's page points to where it is explained (GUIDES in scripts/gen_docs.py)."""
    missing = sorted(set(cli.commands) - set(GEN.GUIDES))
    assert missing == [], f"no guide for {missing}: add them to GUIDES in scripts/gen_docs.py"
