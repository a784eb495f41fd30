"""The sbatch script: valid bash, every manifest value a literal, and the run it describes.

The script runs for real under bash with stand-ins for `srun` and `scontrol` on PATH (Slurm
itself cannot run here): each records the arguments it got, so the tests see exactly what
Slurm would be asked to run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import RUN_ID, render, variant
from trainops.errors import InputError

HOSTILE = [
    "$(touch {canary})",
    "`touch {canary}`",
    "'; touch {canary}; '",
    '"; touch {canary}; "',
    "a b\nc",
    "$${{HOME}}",
]

# srun: skip the srun options, save the rest of the argv (NUL-separated) in a file of its own and
# note the step in `events`; the watcher step waits for SIGTERM, and so does the training step
# when TRAINOPS_TEST_HANG is set. The training step also saves the variables named in
# FAKE_ENV_NAMES, as it sees them.
FAKE_SRUN = r"""#!/bin/bash
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
printf '%s\0' "$@" > "$FAKE_DIR/step-$$"
echo "start $1 ${3:-}" >> "$FAKE_DIR/events"
if [ "$1" = trainops ] && [ "${3:-}" = watch ]; then
    trap 'echo watcher-stopped >> "$FAKE_DIR/events"; exit 0' TERM
    while :; do sleep 0.05; done
fi
if [ "$1" = torchrun ]; then
    # a real training step runs for a while: let the watcher (started just before) get going
    for _ in $(seq 200); do grep -qs "start trainops watch" "$FAKE_DIR/events" && break; sleep 0.05; done
    for name in ${FAKE_ENV_NAMES:-}; do printf '%s' "${!name}" > "$FAKE_DIR/env-$name"; done
    if [ -n "${TRAINOPS_TEST_HANG:-}" ]; then
        trap 'echo training-stopped >> "$FAKE_DIR/events"; exit 0' TERM
        echo hanging >> "$FAKE_DIR/events"  # the trap is set: a signal now is handled
        while :; do sleep 0.05; done
    fi
fi
exit 0
"""
FAKE_SCONTROL = r"""#!/bin/bash
if [ "$1" = show ]; then echo node-a; echo node-b; exit 0; fi
echo "scontrol $*" >> "$FAKE_DIR/events"
"""


def _slurm(tmp_path: Path, train: dict[str, Any] | None = None) -> str:
    overlay = {
        "spec": {
            "registry": "oci://harbor.example.com/llm",
            "train": {"scheduler": "slurm", "topology": None, "slurm": {"partition": "gpu"}, **(train or {})},
            "patches": None,
            "tenants": None,
        }
    }
    rendered = render(variant(tmp_path / "manifest", overlay))
    assert [f.path for f in rendered.files] == ["train/sbatch.sh"] and rendered.objects == []
    return rendered.files[0].text


def _start(tmp_path: Path, script: str, *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    bin_dir, fake = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir(exist_ok=True)
    fake.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "sbatch.sh").write_text(script)
    full = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_DIR": str(fake),
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_SUBMIT_DIR": str(tmp_path / "submit"),
        "SLURM_JOB_ID": "42",
        "WANDB_API_KEY": "from-the-submitting-shell",
        **(env or {}),
    }
    return subprocess.Popen(
        ["bash", str(tmp_path / "sbatch.sh")], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _events(tmp_path: Path) -> list[str]:
    path = tmp_path / "fake" / "events"
    return path.read_text().splitlines() if path.exists() else []


def _step(tmp_path: Path, first: str, third: str | None = None) -> list[str]:
    for path in sorted((tmp_path / "fake").glob("step-*")):
        argv = path.read_text().split("\0")[:-1]
        if argv[0] == first and (third is None or argv[2] == third):
            return argv
    raise AssertionError(f"no step {first} {third or ''}")


def _wait_for(tmp_path: Path, proc: subprocess.Popen[str], event: str) -> None:
    deadline = time.monotonic() + 30
    while not any(line.startswith(event) for line in _events(tmp_path)):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"no {event!r} in {_events(tmp_path)}"
        time.sleep(0.05)


def test_the_script_is_valid_bash(tmp_path: Path) -> None:
    script = _slurm(tmp_path)
    assert script.startswith("#!/bin/bash\n")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_sbatch_directives(tmp_path: Path) -> None:
    script = _slurm(
        tmp_path,
        {"slurm": {"partition": "gpu", "account": "ml", "qos": "high", "time": "12:00:00", "constraint": "h100&ib"}},
    )
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert directives == [
        f"--job-name=tiny-llm-{RUN_ID}",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gpus-per-node=8",
        "--cpus-per-task=32",
        "--mem=262144M",
        "--partition=gpu",
        "--account=ml",
        "--qos=high",
        "--time=12:00:00",
        "--constraint=h100&ib",
        "--exclusive",
        "--requeue",
        "--signal=B:USR1@600",
        "--open-mode=append",
        f"--output=tiny-llm-{RUN_ID}-%j.out",
    ]


@pytest.mark.parametrize("value", ["gpu\n#SBATCH --wrap=id", "a b", "gpu;id", "$(id)"])
def test_a_value_that_could_end_an_sbatch_directive_is_refused(value: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train\.slurm\.partition .* cannot be written as an #SBATCH option"):
        _slurm(tmp_path, {"slurm": {"partition": value}})


def test_the_run_restores_watches_trains_and_stops_the_watcher(tmp_path: Path) -> None:
    proc = _start(tmp_path, _slurm(tmp_path))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    repo = "oci://harbor.example.com/llm/tiny-llm/checkpoints"
    assert _step(tmp_path, "trainops", "pull") == ["trainops", "ckpt", "pull", "--latest", repo, "/ckpt"]
    assert _step(tmp_path, "trainops", "oci://harbor.example.com/llm/tiny-llm/datasets:corpus-v1")[:2] == [
        "trainops",
        "pull",
    ]
    watch = _step(tmp_path, "trainops", "watch")
    assert watch[3:6] == ["/ckpt", "--repository", repo] and watch[-1] == "--until-signal"
    assert _step(tmp_path, "torchrun") == [
        "torchrun", "--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=node-a:29500",
        f"--rdzv-id={RUN_ID}", "--max-restarts=0", "-m", "tiny_llm.train",
    ]  # fmt: skip
    events = _events(tmp_path)
    order = [e for e in events if e.startswith("start")]
    assert order[:2] == [
        "start trainops pull",
        "start trainops oci://harbor.example.com/llm/tiny-llm/datasets:corpus-v1",
    ]
    assert events[-1] == "watcher-stopped"  # after training ended
    assert (tmp_path / "submit" / ".trainops" / "runs" / "tiny-llm" / RUN_ID / "checkpoints").is_dir()


def test_hostile_values_stay_literal(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    args = [h.format(canary=canary) for h in HOSTILE]
    env = {f"HOSTILE_{i}": value for i, value in enumerate(args)}
    script = _slurm(tmp_path, {"command": ["python", "train.py", *args], "env": env})
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    proc = _start(tmp_path, script, env={"FAKE_ENV_NAMES": " ".join(env)})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert not canary.exists()
    assert _step(tmp_path, "torchrun")[-len(args) - 1 :] == ["train.py", *args]
    for name, value in env.items():
        assert (tmp_path / "fake" / f"env-{name}").read_text() == value


def test_a_hostile_path_is_refused_or_quoted(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train\.checkpoint\.dir '/ckpt,/etc' cannot be an enroot mount"):
        _slurm(tmp_path, {"checkpoint": {"dir": "/ckpt,/etc"}})
    script = _slurm(tmp_path, {"workingDir": "/work/$(touch x)"})
    assert "--container-workdir='/work/$(touch x)'" in script


def test_a_missing_secret_stops_the_script_before_anything_runs(tmp_path: Path) -> None:
    script = _slurm(tmp_path)
    assert "from-the-submitting-shell" not in script and "WANDB_API_KEY=" not in script
    proc = _start(tmp_path, script, env={"WANDB_API_KEY": ""})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "train.secretEnv.WANDB_API_KEY is not set: export it before running sbatch" in err
    assert _events(tmp_path) == []


def test_the_time_limit_signal_stops_training_then_the_watcher_then_requeues(tmp_path: Path) -> None:
    proc = _start(tmp_path, _slurm(tmp_path), env={"TRAINOPS_TEST_HANG": "1"})
    _wait_for(tmp_path, proc, "hanging")
    os.kill(proc.pid, signal.SIGUSR1)  # what `#SBATCH --signal=B:USR1@600` does
    _, err = proc.communicate(timeout=30)
    events = [e for e in _events(tmp_path) if not e.startswith(("start", "hanging"))]
    assert events == ["training-stopped", "watcher-stopped", "scontrol requeue 42"], err


def test_scancel_stops_training_without_a_requeue(tmp_path: Path) -> None:
    proc = _start(tmp_path, _slurm(tmp_path), env={"TRAINOPS_TEST_HANG": "1"})
    _wait_for(tmp_path, proc, "hanging")
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=30)
    events = [e for e in _events(tmp_path) if not e.startswith(("start", "hanging"))]
    assert events == ["training-stopped", "watcher-stopped"]


def test_the_image_is_named_as_enroot_wants_it(tmp_path: Path) -> None:
    script = _slurm(tmp_path)
    assert "image='harbor.example.com#llm/tiny-llm/image:sha256:" in script


def test_bare_metal_runs_the_setup_lines_then_the_supervisor(tmp_path: Path) -> None:
    script = _slurm(
        tmp_path,
        {"slurm": {"runtime": "bare-metal", "setup": ["module load cuda/12.4", "source /envs/llm/bin/activate"]}},
    )
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    lines = script.splitlines()
    setup = lines.index("module load cuda/12.4")
    assert lines[setup + 1] == "source /envs/llm/bin/activate"
    assert "--container-image" not in script
    assert lines[-2].startswith("exec trainops train run --slurm -f trainops.yaml --run-id ")
    assert lines.index('cd "${SLURM_SUBMIT_DIR}"') < setup < lines.index(lines[-2])


def test_setup_lines_need_bare_metal(tmp_path: Path) -> None:
    from trainops.errors import ManifestError

    with pytest.raises(ManifestError, match="setup lines run only with runtime: bare-metal"):
        _slurm(tmp_path, {"slurm": {"setup": ["module load cuda"]}})
