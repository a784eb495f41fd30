"""Running `trainops` in tests: in-process through main() (which returns the exit code), or as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from inspect import signature
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from trainops.cli.main import main

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def last_error_line(self) -> str:
        lines = self.stderr.splitlines()
        return lines[-1] if lines else ""


def _runner() -> CliRunner:
    """CliRunner with stderr kept apart (always so since click 8.2, an option before)."""
    params = signature(CliRunner).parameters
    kwargs: dict[str, Any] = {}
    if "mix_stderr" in params:
        kwargs["mix_stderr"] = False
    if "catch_exceptions" in params:
        kwargs["catch_exceptions"] = False
    return CliRunner(**kwargs)


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Outcome:
    """`trainops ARGS` in-process, through main(), which returns the exit code."""
    with _runner().isolation(env=env) as streams:
        code = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    out, err = streams[0], streams[1]
    return Outcome(code, out.getvalue().decode(), err.getvalue().decode() if err else "")


def run_subprocess(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path = REPO) -> Outcome:
    """`python -m trainops.cli.main ARGS` in a fresh interpreter."""
    full_env = {k: v for k, v in os.environ.items() if k != "TRAINOPS_DEBUG"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "trainops.cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)
