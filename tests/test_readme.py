"""The README stands alone and its set-up commands run as written, as root or as a sudoer."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md"]


def test_the_readmes_point_only_inside_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        assert "shared/" not in text, f"{doc.name} points outside the repository"
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if "://" in target:
                continue
            assert (doc.parent / target).resolve().is_relative_to(REPO), target
            assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"


def test_the_set_up_commands_need_no_sudo_as_root() -> None:
    text = (REPO / "README.md").read_text()
    commands = [line.strip() for line in text.splitlines() if line.startswith("    scripts/")]
    assert len(commands) == 2 and all("sudo" not in c for c in commands)
    assert all(c.startswith("scripts/as-root ") for c in commands)
    done = subprocess.run([REPO / "scripts/as-root", "id", "-u"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0"  # root runs it directly: no sudo on this machine


def test_as_root_without_root_or_sudo_says_what_to_do(tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed"
    bin_dir = tmp_path / "bin"  # a PATH with the tools as-root uses, and no sudo
    bin_dir.mkdir()
    for tool in ("id", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    bin_dir.chmod(0o755)
    tmp_path.chmod(0o755)
    out = subprocess.run(  # the script on stdin: nobody may not read the checkout
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", str(bin_dir / "sh"), "-s", "true"],
        input=(REPO / "scripts/as-root").read_text(),
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir)},
        check=False,
    )
    assert out.returncode == 1 and "sudo is not installed: run it as root" in out.stderr


def test_the_dependencies_page_names_every_runtime_dependency() -> None:
    import tomllib

    section = (REPO / "docs" / "development" / "dependencies.md").read_text().lower()
    named = {"pyyaml": "pyyaml", "docker": "docker-py", "jinja2": "jinja2"}
    for requirement in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        dist = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()
        assert named.get(dist, dist) in section, f"docs/development/dependencies.md does not say why {dist} is needed"


def test_the_readme_is_a_front_door() -> None:
    """What trainops is, the set-up commands, a tour and where to go next; the manual is the
    docs site (docs/), so the README stays short and points into it."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250, "README.md is over 250 lines: move the detail into a page of docs/"
    for section in ("## Set up on a fresh Debian/Ubuntu machine", "## A five-minute tour", "## Where to go next"):
        assert section in text, f"README.md lacks {section!r}"
    assert "docs/getting-started/" in text and "docs/reference/" in text
