"""A new user's first day: the README's `trainops init` block runs as written, in an empty
directory, and leaves what it says it leaves (the scaffold's eval follows the eval
contract, the rollout commits land in the local GitOps repo, lineage starts at the commit
init made)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from trainops_testing.cli import REPO

MARKER = "<!-- first-day:"


def readme_block() -> str:
    """The shell block that follows the first-day marker in the README, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.count(MARKER) == 1, "the README has one first-day block"
    after = text.split(MARKER, 1)[1]
    fence = after.index("```sh\n") + len("```sh\n")
    return after[fence : after.index("```", fence)]


def _environment(tmp_path: Path) -> dict[str, str]:
    """This interpreter's trainops first on the PATH; a HOME and git identity of the test's own."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = New User\n\temail = new@example.com\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "GIT_"))}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def test_the_readme_first_day_runs_as_written_in_an_empty_directory(tmp_path: Path) -> None:
    block = readme_block()
    commands = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands[:2] == ["mkdir my-model && cd my-model", "trainops init"]
    assert any(c.startswith("trainops rollout rollback") for c in commands)
    work = tmp_path / "work"
    work.mkdir()
    env = _environment(tmp_path)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"the README's first day failed:\n{done.stdout}\n{done.stderr}"
    project = work / "my-model"
    # What the block says happened: step-30 served as stable again after the rollback.
    status = subprocess.run(
        ["trainops", "rollout", "status", "--env", "dev", "-o", "json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    served = json.loads(status.stdout)
    assert served["stable"]["version"] == "step-30"
    assert served["canary"] is None
    # The lineage starts at the commit init made and reaches the rollout commits.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True)
    assert f"[{head.stdout.strip()[:12]}]" in done.stdout
    assert "my-model/model:step-60" in done.stdout
    # The file:// warning is said once per command that renders serving objects (start,
    # start, promote; rollback restores a committed tree), not once per release in them.
    warning = "warning: the release is in a file:// registry, which pods in a cluster cannot read"
    assert done.stderr.count(warning) == 3, done.stderr
    # release ls and eval ls fit 80 columns piped, with whole timestamps and no cut cells.
    for command in (("release", "ls"), ("eval", "ls")):
        shown = subprocess.run(
            ["trainops", *command, "--env", "dev"], cwd=project, env=env, capture_output=True, text=True, check=True
        )
        _heading, *rows = shown.stdout.splitlines()  # the repository or checkpoint on a line of its own
        assert all(len(row) <= 80 for row in rows), shown.stdout
        assert "…" not in shown.stdout
        assert re.search(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\b", shown.stdout), shown.stdout
    walked = done.stdout.split(f"[{head.stdout.strip()[:12]}]", 1)[1]
    assert "rollback" in walked and "clusters/dev-serve@" in walked
    # The second day: gc --keep-last 1 keeps what the GitOps repo serves and what it needs.
    gc = subprocess.run(
        ["trainops", "registry", "gc", "--keep-last", "1", "-o", "json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    kept = {k["artifact"].rsplit("/", 2)[-2:][-1]: k["reason"] for k in json.loads(gc.stdout)["keptFor"]}
    assert kept["model:step-30"].startswith("served as stable by the GitOps repo (commit "), gc.stdout
    pulled = subprocess.run(
        ["trainops", "pull", "my-model/model:step-30", str(tmp_path / "pulled")], cwd=project, env=env, check=False
    )
    assert pulled.returncode == 0
    shown = subprocess.run(
        ["trainops", "release", "show", "my-model/model:step-30", "--env", "dev", "-o", "json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    release = json.loads(shown.stdout)
    for ref in (release["eval"], release["provenance"]):  # its eval report and provenance, still there
        assert subprocess.run(["trainops", "registry", "show", ref], cwd=project, env=env, check=False).returncode == 0
