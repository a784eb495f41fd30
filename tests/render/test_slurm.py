"""The sbatch script: valid bash, every manifest value a literal, and the one thing it runs.

The script runs for real under bash with a stand-in for `trainops` on PATH (Slurm itself
cannot run here): it records the arguments it got, so the tests see exactly what the job's
batch host would run. What that supervisor then does is tested in tests/slurm/ (on a real
Slurm cluster) and, for its container options, in tests/pipeline/test_slurm_container.py.
"""

from __future__ import annotations

import os
import subprocess
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

# trainops: save its argv (NUL-separated) and the directory it ran in
FAKE_TRAINOPS = r"""#!/bin/bash
printf '%s\0' "$@" > "$FAKE_DIR/argv"
pwd > "$FAKE_DIR/cwd"
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


def _run(tmp_path: Path, script: str) -> list[str]:
    """Run the script with the stand-in trainops; the argv trainops got."""
    bin_dir, fake = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir(exist_ok=True)
    fake.mkdir(exist_ok=True)
    (bin_dir / "trainops").write_text(FAKE_TRAINOPS)
    (bin_dir / "trainops").chmod(0o755)
    (tmp_path / "submit").mkdir(exist_ok=True)
    (tmp_path / "sbatch.sh").write_text(script)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_DIR": str(fake),
        "SLURM_SUBMIT_DIR": str(tmp_path / "submit"),
    }
    done = subprocess.run(["bash", str(tmp_path / "sbatch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return (fake / "argv").read_text().split("\0")[:-1]


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


def test_under_pyxis_the_script_execs_the_supervisor_with_the_pinned_image(tmp_path: Path) -> None:
    argv = _run(tmp_path, _slurm(tmp_path))
    assert argv[:7] == ["train", "run", "--slurm", "-f", "trainops.yaml", "--run-id", RUN_ID]
    run_dir = tmp_path / "submit" / ".trainops" / "runs" / "tiny-llm" / RUN_ID
    assert argv[7:9] == ["--ckpt-dir", f"{run_dir}/checkpoints"]
    assert argv[9] == "--image" and argv[10].startswith("harbor.example.com/llm/tiny-llm/image@sha256:")
    assert len(argv) == 11
    assert (tmp_path / "fake" / "cwd").read_text().strip() == str(tmp_path / "submit")


def test_train_slurm_run_dir_holds_the_checkpoints(tmp_path: Path) -> None:
    script = _slurm(tmp_path, {"slurm": {"partition": "gpu", "runDir": "/shared/runs/r1"}})
    argv = _run(tmp_path, script)
    assert argv[argv.index("--ckpt-dir") + 1] == "/shared/runs/r1/checkpoints"


def test_hostile_values_never_reach_the_script(tmp_path: Path) -> None:
    """The command, its arguments and train.env stay in the manifest: the supervisor reads
    them there and hands them to srun as an argv, never through a shell."""
    canary = tmp_path / "pwned"
    args = [h.format(canary=canary) for h in HOSTILE]
    env = {f"HOSTILE_{i}": value for i, value in enumerate(args)}
    script = _slurm(tmp_path, {"command": ["python", "train.py", *args], "env": env})
    assert not any(value in script for value in args)
    _run(tmp_path, script)
    assert not canary.exists()


def test_a_hostile_path_is_refused_or_quoted(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"train\.checkpoint\.dir '/ckpt,/etc' cannot be an enroot mount"):
        _slurm(tmp_path, {"checkpoint": {"dir": "/ckpt,/etc"}})
    with pytest.raises(InputError, match=r"train\.datasets\[0\]\.mountPath '/data:rw' cannot be an enroot mount"):
        _slurm(tmp_path, {"datasets": [{"name": "corpus", "ref": "tiny-llm/datasets:v1", "mountPath": "/data:rw"}]})
    with pytest.raises(InputError, match=r"train\.slurm\.runDir '/runs/a b' cannot be an enroot mount"):
        _slurm(tmp_path, {"slurm": {"partition": "gpu", "runDir": "/runs/a b"}})
    script = _slurm(tmp_path, {"slurm": {"partition": "gpu", "runDir": "/runs/$(mkdir${IFS}pwned)`id`"}})
    argv = _run(tmp_path, script)
    assert argv[argv.index("--ckpt-dir") + 1] == "/runs/$(mkdir${IFS}pwned)`id`/checkpoints"
    assert not (tmp_path / "submit" / "pwned").exists()


def test_secrets_never_reach_the_script(tmp_path: Path) -> None:
    script = _slurm(tmp_path)
    assert "WANDB_API_KEY" not in script


def test_bare_metal_runs_the_setup_lines_then_the_supervisor(tmp_path: Path) -> None:
    script = _slurm(
        tmp_path,
        {"slurm": {"runtime": "bare-metal", "setup": ["module load cuda/12.4", "source /envs/llm/bin/activate"]}},
    )
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    lines = script.splitlines()
    setup = lines.index("module load cuda/12.4")
    assert lines[setup + 1] == "source /envs/llm/bin/activate"
    assert "--image" not in script and "--container" not in script
    assert lines[-2].startswith("exec trainops train run --slurm -f trainops.yaml --run-id ")
    assert lines.index('cd "${SLURM_SUBMIT_DIR}"') < setup < lines.index(lines[-2])


def test_setup_lines_prepare_the_batch_host_under_pyxis_too(tmp_path: Path) -> None:
    """trainops runs on the batch host under pyxis as well: the setup lines can put it on PATH."""
    script = _slurm(tmp_path, {"slurm": {"partition": "gpu", "setup": ['PATH="$PWD/venv/bin:$PATH"']}})
    venv = tmp_path / "submit" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "trainops").write_text(FAKE_TRAINOPS + 'touch "$FAKE_DIR/from-the-venv"\n')
    (venv / "trainops").chmod(0o755)
    argv = _run(tmp_path, script)  # the stand-in of _run is on PATH too, after the venv's
    assert argv[:3] == ["train", "run", "--slurm"] and (tmp_path / "fake" / "from-the-venv").exists()
