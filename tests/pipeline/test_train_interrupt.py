"""Ctrl-C on `trainops train run --local`, as a terminal sends it: SIGINT to the foreground
process group, the trainer's too (trainops also passes SIGTERM on); the scaffold's trainer
saves and stops, trainops exits 130 with one line naming what was pushed, no traceback from
either, and the next run resumes from the checkpoint saved on the way out."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainops_testing.cli import run_subprocess

TRAINOPS = [sys.executable, "-m", "trainops.cli.main"]


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(pattern, path.read_text(encoding="utf-8"))
        if found:
            return found
        assert proc.poll() is None, path.read_text(encoding="utf-8")[-2000:]
        assert time.monotonic() < deadline, (
            f"no {pattern!r} in {timeout} s: " + path.read_text(encoding="utf-8")[-2000:]
        )
        time.sleep(0.05)


def test_ctrl_c_stops_the_trainer_with_a_checkpoint_and_exits_130(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRAINOPS_DEBUG"}
    made = run_subprocess(["init"], cwd=project, env=env)
    assert made.code == 0, made.stderr
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    argv = [*TRAINOPS, "train", "run", "--local", "--env", "dev", "-e", "TRAIN_STEPS=1000000000"]
    argv += ["-e", "CHECKPOINT_EVERY=1000000"]
    with out.open("w") as stdout, err.open("w") as stderr:
        # its own session: the group a terminal's Ctrl-C reaches is trainops' alone
        proc = subprocess.Popen(argv, cwd=project, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            _wait_for(err, r"pushed step-\d+", proc)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    said, printed = err.read_text(encoding="utf-8"), out.read_text(encoding="utf-8")
    assert code == 130, said[-2000:]
    assert "Traceback" not in said + printed
    last = said.splitlines()[-1]
    assert last.startswith("Interrupted: train.command stopped on SIGINT (run local-"), last
    saved = re.search(r"stopped at step (\d+) on SIG(INT|TERM)", printed)
    assert saved, printed[-2000:]  # the trainer saved on the signal, and said so
    step = int(saved.group(1))
    assert f":step-{step:06d}@sha256:" in last or f":step-{step}@sha256:" in last, last  # pushed on the way out
    again = subprocess.run(
        [*TRAINOPS, "train", "run", "--local", "--env", "dev", "-e", f"TRAIN_STEPS={step + 5}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert re.search(rf"step {step + 5}: val_loss", again.stdout), again.stdout[-2000:]
