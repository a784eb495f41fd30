"""Local runs are first-class: `train run --local` says the run's id as it starts (with what
it restored, before the trainer's first line), the supervisor keeps the trainer's output for
`train logs RUN`, and `train status` lists the local runs the registry keeps a timeline of,
or shows one without --env (the base manifest schedules elsewhere)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from trainops_testing.cli import run, run_subprocess

MANIFEST = """\
apiVersion: trainops.dev/v1alpha1
kind: Pipeline
metadata: {name: lr}
spec:
  registry: file://.trainops/registry
  image: {template: train-pytorch}
  train:
    scheduler: volcano
    command: [python3, -c, "import sys; print('trainer out', flush=True); print('trainer err', file=sys.stderr)"]
    checkpoint: {resume: none}
environments:
  dev:
    train: {scheduler: local}
"""


def test_local_runs_are_followed_by_id(tmp_path: Path) -> None:
    (tmp_path / "trainops.yaml").write_text(MANIFEST)
    first = run_subprocess(["train", "run", "--local", "--env", "dev", "--run-id", "r1"], cwd=tmp_path)
    assert first.code == 0, first.stderr
    lines = first.stderr.splitlines()
    assert lines[0].startswith("trainops: run r1 starts; its output is kept in "), first.stderr
    log = tmp_path / ".trainops/runs/lr/logs/r1.log"
    assert str(log) in lines[0] and "`trainops train logs r1`" in lines[0]
    said = lines.index("trainops: nothing restored (checkpoint.resume is none: starting from what the directory holds)")
    assert said < lines.index("trainer err"), first.stderr  # what it started from, at the start
    assert first.stdout == "trainer out\n"
    second = run_subprocess(["train", "run", "--local", "--env", "dev", "-o", "json"], cwd=tmp_path)
    assert second.code == 0, second.stderr
    generated = re.match(r"trainops: run (\S+) starts;", second.stderr)
    assert generated, second.stderr
    assert json.loads(second.stdout)["log"] == str(tmp_path / f".trainops/runs/lr/logs/{generated[1]}.log")

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        kept = run("train", "logs", "r1")  # no --env: the base manifest schedules on Volcano
        assert kept.code == 0, kept.stderr
        assert sorted(kept.stdout.splitlines()) == ["trainer err", "trainer out"]
        one = run("train", "status", "r1")
        assert one.code == 0, one.stderr
        assert one.stdout.splitlines()[0] == "r1  local  completed"
        assert json.loads(run("train", "status", "r1", "-o", "json").stdout)["ettr"]["starts"] == 1
        listed = run("train", "status", "--env", "dev", "-o", "json")
        assert listed.code == 0, listed.stderr
        assert [r["runId"] for r in json.loads(listed.stdout)] == [generated[1], "r1"]  # newest first
        table = run("train", "status", "--env", "dev")
        assert table.stdout.splitlines()[:2] == ["local runs", "RUN" + table.stdout.splitlines()[1][3:]]
        assert {line.split()[0] for line in table.stdout.splitlines()[2:]} == {"r1", generated[1]}
        unknown = run("train", "status", "nosuch", "--env", "dev")
        assert unknown.code == 4 and "no start of run nosuch" in unknown.last_error_line
    finally:
        os.chdir(cwd)
