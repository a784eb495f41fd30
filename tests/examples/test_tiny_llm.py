"""End-to-end tests of the tiny-llm example, run as real subprocesses in temporary dirs.

They check the contract trainops relies on: the environment variables, the atomic
``step-NNNNNN`` checkpoint layout, exact resume, crash safety under SIGKILL, graceful stop
on SIGTERM and the JSON printed by ``tiny_llm.train`` and ``tiny_llm.eval``.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm"
CORPUS = EXAMPLE_DIR / "data" / "corpus.txt"
CHECKPOINT_FILES = {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}
MODEL_TENSORS = {"embed.weight", "fc1.weight", "fc1.bias", "head.weight", "head.bias"}
STATE_KEYS = {"step", "metrics", "run_id", "resumed_from", "config", "rng"}
EVAL_KEYS = {"step", "val_loss", "perplexity", "bits_per_char", "sample"}
STEP_DIR = re.compile(r"^step-(\d{6,})$")

# A small model so that a few hundred steps take well under a second.
SMALL = ["--context", "6", "--embed", "8", "--hidden", "48", "--batch-size", "32"]
TIMEOUT = 120.0


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every stdout line, parsed; fails if any line is not a JSON object."""
        out: list[dict[str, Any]] = []
        for line in self.stdout.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                pytest.fail(f"non-JSON line on stdout: {line!r}\nstderr:\n{self.stderr}")
            assert isinstance(record, dict), line
            out.append(record)
        return out


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment without any variable the example reads, plus overrides."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRAINOPS_", "TINY_LLM_")) and k not in ("RANK", "WORLD_SIZE")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(overrides)
    return env


def command(module: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", f"tiny_llm.{module}", *args]


def run_module(module: str, args: list[str], env: Mapping[str, str]) -> Run:
    proc = subprocess.run(
        command(module, args),
        cwd=EXAMPLE_DIR,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def train(ckpt_dir: Path, *args: str, **env: str) -> Run:
    result = run_module("train", [*SMALL, *args], clean_env(TRAINOPS_CKPT_DIR=str(ckpt_dir), **env))
    assert result.returncode == 0, f"train failed ({result.returncode}):\n{result.stderr}"
    return result


def evaluate(args: list[str], **env: str) -> Run:
    return run_module("eval", args, clean_env(**env))


def step_dirs(ckpt_dir: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for entry in ckpt_dir.iterdir():
        match = STEP_DIR.match(entry.name)
        if match:
            found[int(match.group(1))] = entry
    return dict(sorted(found.items()))


def temp_dirs(ckpt_dir: Path) -> list[str]:
    return sorted(e.name for e in ckpt_dir.iterdir() if e.name.startswith(".tmp-"))


def read_state(path: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((path / "trainer_state.json").read_text())
    return state


def check_checkpoint(path: Path) -> dict[str, Any]:
    """Assert ``path`` is a complete, loadable checkpoint; return its trainer_state."""
    assert {p.name for p in path.iterdir()} == CHECKPOINT_FILES, sorted(path.iterdir())
    model = load_file(str(path / "model.safetensors"))
    optimizer = load_file(str(path / "optimizer.safetensors"))
    state = read_state(path)
    assert set(model) == MODEL_TENSORS
    expected_moments = {f"{kind}.{name}" for kind in ("exp_avg", "exp_avg_sq") for name in model}
    assert set(optimizer) == expected_moments
    for name, tensor in model.items():
        assert tensor.dtype == np.float32
        assert np.isfinite(tensor).all(), name
        assert optimizer[f"exp_avg.{name}"].shape == tensor.shape
    assert set(state) >= STATE_KEYS
    match = STEP_DIR.match(path.name)
    assert match is not None and int(match.group(1)) == state["step"]
    assert set(state["metrics"]) >= {"train_loss", "val_loss"}
    assert math.isfinite(state["metrics"]["val_loss"])
    return state


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    """Poll ``condition`` until it holds; fail if the process exits or time runs out."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"trainer exited with {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


def start_trainer(ckpt_dir: Path, log_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "stdout", "wb") as out, open(log_dir / "stderr", "wb") as err:
        return subprocess.Popen(
            command("train", [*SMALL, *args]),
            cwd=EXAMPLE_DIR,
            env=clean_env(TRAINOPS_CKPT_DIR=str(ckpt_dir)),
            stdout=out,
            stderr=err,
        )


def small_corpus(tmp_path: Path, chars: int = 6000) -> str:
    """The first ``chars`` characters of the shipped corpus, as a file; returns its path."""
    path = tmp_path / "small-corpus.txt"
    path.write_text(CORPUS.read_text(encoding="utf-8")[:chars], encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    ckpt_dir = tmp_path_factory.mktemp("short") / "checkpoints"
    result = train(
        ckpt_dir,
        "--log-every",
        "50",
        TRAINOPS_MAX_STEPS="300",
        TRAINOPS_CKPT_EVERY="100",
        TRAINOPS_RUN_ID="run-short",
        RANK="0",
        WORLD_SIZE="1",
    )
    return ckpt_dir, result


def test_short_run_writes_checkpoints_and_learns(short_run: tuple[Path, Run]) -> None:
    ckpt_dir, result = short_run
    records = result.records
    *intervals, final = records
    assert [r["step"] for r in intervals] == [50, 100, 150, 200, 250, 300]
    for record in intervals:
        assert set(record) == {"step", "train_loss", "val_loss", "tokens_per_second"}
        assert record["tokens_per_second"] > 0
    assert final["final"] is True and final["step"] == 300
    assert final["checkpoint"] == "step-000300"

    assert sorted(p.name for p in ckpt_dir.iterdir()) == [
        "step-000100",
        "step-000200",
        "step-000300",
    ]
    states = [check_checkpoint(path) for path in step_dirs(ckpt_dir).values()]
    for state in states:
        assert state["run_id"] == "run-short"
        assert state["resumed_from"] is None
        assert state["config"]["hidden"] == 48
        assert state["config"]["max_steps"] == 300
    model = load_file(str(ckpt_dir / "step-000300" / "model.safetensors"))
    vocab_size = len(set(CORPUS.read_text(encoding="utf-8")))
    assert model["embed.weight"].shape == (vocab_size, 8)
    assert model["fc1.weight"].shape == (6 * 8, 48)
    assert model["head.weight"].shape == (48, vocab_size)

    val = [s["metrics"]["val_loss"] for s in states]
    assert val[0] > val[1] > val[2], val
    # A uniform guess costs ln(vocab) nats; the model must do clearly better.
    assert val[-1] < math.log(vocab_size) - 1.0, val
    logged = [r["val_loss"] for r in intervals]
    assert logged[-1] < logged[0] - 0.2, logged
    assert logged[-1] == pytest.approx(val[-1], abs=1e-5)


def test_resume_is_bit_exact(tmp_path: Path) -> None:
    # A small slice of the corpus makes an epoch ~150 steps, so the interruption at K=250
    # falls mid-epoch after a reshuffle; the LR decay also spans the interruption.
    args = ["--data", small_corpus(tmp_path), "--lr-decay-steps", "500", "--log-every", "100"]
    k, total = 250, 500

    straight = tmp_path / "a"
    train(straight, *args, TRAINOPS_MAX_STEPS=str(total), TRAINOPS_CKPT_EVERY="125")

    resumed = tmp_path / "b"
    first = train(resumed, *args, TRAINOPS_MAX_STEPS=str(k), TRAINOPS_CKPT_EVERY="125")
    assert first.records[-1]["step"] == k
    assert sorted(step_dirs(resumed)) == [125, 250]
    second = train(resumed, *args, TRAINOPS_MAX_STEPS=str(total), TRAINOPS_CKPT_EVERY="125")
    assert "step-000250" in second.stderr
    assert second.records[0]["step"] == 300  # continues, does not restart
    assert second.records[-1]["resumed_from"] == "step-000250"

    a_dir, b_dir = straight / "step-000500", resumed / "step-000500"
    a_state, b_state = check_checkpoint(a_dir), check_checkpoint(b_dir)
    assert a_state["resumed_from"] is None
    assert b_state["resumed_from"] == "step-000250"
    for name in ("model.safetensors", "optimizer.safetensors"):
        a_tensors = load_file(str(a_dir / name))
        b_tensors = load_file(str(b_dir / name))
        assert set(a_tensors) == set(b_tensors)
        for key, tensor in a_tensors.items():
            assert tensor.dtype == b_tensors[key].dtype
            assert np.array_equal(tensor, b_tensors[key]), f"{name}:{key} differs after resume"
    assert a_state["rng"] == b_state["rng"]
    assert a_state["metrics"]["val_loss"] == b_state["metrics"]["val_loss"]


def test_sigkill_leaves_only_complete_checkpoints(tmp_path: Path) -> None:
    # Checkpointing every step keeps the trainer writing almost all the time, so the kill
    # lands mid-write: any non-atomic write would leave an incomplete ``step-*`` behind. A
    # small corpus keeps the per-checkpoint validation pass short next to the write.
    corpus = small_corpus(tmp_path)
    ckpt_dir = tmp_path / "checkpoints"
    proc = start_trainer(ckpt_dir, tmp_path / "logs", "--data", corpus, "--max-steps", "1000000", "--ckpt-every", "1")
    try:
        wait_until(lambda: ckpt_dir.is_dir() and len(step_dirs(ckpt_dir)) >= 5, proc, "5 checkpoints")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
    assert proc.returncode == -signal.SIGKILL

    present = step_dirs(ckpt_dir)
    assert len(present) >= 5
    for path in present.values():
        check_checkpoint(path)
    newest_step, newest = max(present.items())

    result = train(ckpt_dir, "--data", corpus, "--max-steps", str(newest_step + 20), "--ckpt-every", "10")
    assert f"resuming from checkpoint {newest}" in result.stderr
    assert result.records[-1]["resumed_from"] == newest.name
    after = step_dirs(ckpt_dir)
    new_steps = [s for s in after if s > newest_step]
    # every multiple of --ckpt-every after the resume point, plus the final step
    end = newest_step + 20
    assert new_steps == sorted({s for s in range(newest_step + 1, end) if s % 10 == 0} | {end})
    for step in new_steps:
        assert check_checkpoint(after[step])["resumed_from"] == newest.name
    assert temp_dirs(ckpt_dir) == []


def test_sigterm_checkpoints_then_exits(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    proc = start_trainer(ckpt_dir, tmp_path / "logs", "--max-steps", "1000000", "--ckpt-every", "1000")
    try:
        wait_until(lambda: ckpt_dir.is_dir() and bool(step_dirs(ckpt_dir)), proc, "checkpoint")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    final = json.loads((tmp_path / "logs" / "stdout").read_text().splitlines()[-1])
    assert final["final"] is True
    stopped = final["step"]
    present = step_dirs(ckpt_dir)
    assert max(present) == stopped and final["checkpoint"] == present[stopped].name
    for path in present.values():
        check_checkpoint(path)
    assert temp_dirs(ckpt_dir) == []


def test_env_contract_flags_override_and_stale_temp_cleanup(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    stale = ckpt_dir / ".tmp-step-000010-12345-deadbeef"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half a file")
    result = train(
        ckpt_dir,
        "--max-steps",
        "20",  # the flag wins over TRAINOPS_MAX_STEPS
        TRAINOPS_MAX_STEPS="1000",
        TRAINOPS_CKPT_EVERY="10",
        TINY_LLM_LOG_EVERY="5",
        TRAINOPS_RUN_ID="env-run",
    )
    assert [r["step"] for r in result.records] == [5, 10, 15, 20, 20]
    assert temp_dirs(ckpt_dir) == []
    assert sorted(step_dirs(ckpt_dir)) == [10, 20]
    state = check_checkpoint(ckpt_dir / "step-000020")
    assert state["run_id"] == "env-run"
    assert state["config"]["ckpt_every"] == 10

    # Nothing left to do: a restart with the same target exits cleanly without training.
    again = train(ckpt_dir, "--max-steps", "20", TRAINOPS_CKPT_EVERY="10")
    assert [r["step"] for r in again.records] == [20]
    assert sorted(step_dirs(ckpt_dir)) == [10, 20]


def test_only_rank_zero_writes_checkpoints(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "checkpoints"
    result = train(ckpt_dir, "--max-steps", "20", "--ckpt-every", "10", RANK="1", WORLD_SIZE="2")
    assert result.records[-1]["step"] == 20
    assert not ckpt_dir.exists() or step_dirs(ckpt_dir) == {}


def test_eval_reports_metrics(short_run: tuple[Path, Run]) -> None:
    ckpt_dir, _ = short_run
    result = evaluate([], TRAINOPS_CKPT_DIR=str(ckpt_dir))
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    (report,) = result.records
    assert set(report) == EVAL_KEYS
    assert report["step"] == 300
    val_loss = report["val_loss"]
    assert isinstance(val_loss, float) and math.isfinite(val_loss)
    assert val_loss == pytest.approx(read_state(ckpt_dir / "step-000300")["metrics"]["val_loss"], abs=1e-5)
    assert report["perplexity"] == pytest.approx(math.exp(val_loss), rel=1e-4)
    assert report["bits_per_char"] == pytest.approx(val_loss / math.log(2), rel=1e-4)
    assert isinstance(report["sample"], str) and len(report["sample"]) > 20

    older = ckpt_dir / "step-000100"
    for run in (
        evaluate(["--checkpoint", str(older)], TRAINOPS_CKPT_DIR=str(ckpt_dir)),
        evaluate([], TRAINOPS_CHECKPOINT=str(older)),
    ):
        assert run.returncode == 0, run.stderr
        (report,) = run.records
        assert report["step"] == 100
        assert report["val_loss"] == pytest.approx(read_state(older)["metrics"]["val_loss"])


def test_eval_without_checkpoint_fails_with_message(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for run in (
        evaluate([], TRAINOPS_CKPT_DIR=str(empty)),
        evaluate(["--checkpoint", str(tmp_path / "missing")]),
    ):
        assert run.returncode != 0
        assert run.stdout == ""
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "checkpoint" in lines[0], run.stderr


def test_every_render_warning_of_the_example_is_explained_in_it() -> None:
    """The example that uses every section renders cleanly, or says in its comments why not."""
    from trainops_testing.cli import run

    manifest = Path(__file__).resolve().parents[2] / "examples" / "tiny-llm" / "trainops.yaml"
    out = run("validate", "--render", "-f", str(manifest), "-o", "json")
    assert out.code == 0, out.stderr
    warnings = {w for check in json.loads(out.stdout)["render"] for w in check["warnings"]}
    comments = " ".join(
        line.split("#", 1)[1].strip() for line in manifest.read_text().splitlines() if "# render warning" in line
    )
    assert warnings
    for warning in warnings:
        head = re.sub(r"file://\S+", "file://…", warning).split(":")[0][:40]
        assert head in comments.replace('"', ""), f"unexplained render warning: {warning}"
