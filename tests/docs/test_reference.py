"""The reference is generated from the code (scripts/gen_reference.py) and current: a stale
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
REGENERATE = "regenerate with: python scripts/gen_reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
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
            metavar = param.metavar or param.human_readable_name.upper()
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
    assert not missing, f"docs/reference/environment.md lacks {missing}: add them to scripts/gen_reference.py"


def test_the_shape_of_every_data_command_is_read_from_the_code() -> None:
    unread = [
        " ".join(path)
        for path, command in COMMANDS
        if any("--output" in getattr(p, "opts", ()) for p in command.params) and GEN.json_shape(command) is None
    ]
    assert unread == [], f"-o json shape not found for {unread}: scripts/gen_reference.py cannot read what they print"
