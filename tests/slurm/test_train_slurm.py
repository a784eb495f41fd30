"""examples/tiny-llm trained through a real Slurm scheduler (env slurm-local, bare metal).

`trainops train submit` runs sbatch on the one-node cluster of the fixture; the job's
supervisor (`trainops train run --slurm`) restores, trains, pushes checkpoints to the
embedded registry. Checked from the outside: Slurm's own view (`scontrol show job`), the
registry's tags and lineage, the GitOps repository's commits.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainops_testing.cli import run
from trainops_testing.services import wait_for
from trainops_testing.slurm_cluster import SlurmCluster, SshServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny-llm"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


@pytest.fixture
def project(tmp_path: Path, slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/tiny-llm; its slurm-local setup line activates this interpreter's venv."""
    root = tmp_path / "tiny-llm"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".trainops", "checkpoints", "__pycache__"))
    monkeypatch.setenv("TRAINOPS_VENV", sys.prefix)
    monkeypatch.delenv("TRAINOPS_DEBUG", raising=False)
    return root


def overlay(root: Path, name: str, train: dict[str, object]) -> None:
    """Add environment `name`: slurm-local with these train fields merged over it."""
    doc = yaml.safe_load((root / "trainops.yaml").read_text())
    base = doc["environments"]["slurm-local"]
    env = {**base, "train": {**base["train"], **train}}
    doc["environments"][name] = env
    (root / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def submit(root: Path, env: str = "slurm-local") -> dict[str, object]:
    result = run("train", "submit", "-f", str(root / "trainops.yaml"), "--env", env, "-o", "json")
    assert result.code == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def steps(root: Path) -> list[int]:
    """The steps of the checkpoints in the registry, as `trainops ckpt ls` lists them."""
    result = run("ckpt", "ls", "-f", str(root / "trainops.yaml"), "-o", "json")
    assert result.code == 0, result.stderr
    return sorted(int(item["step"]) for item in json.loads(result.stdout))


def lineage_text(root: Path, tag: str) -> str:
    ref = f"tiny-llm/checkpoints:{tag}"
    result = run("lineage", ref, "-f", str(root / "trainops.yaml"), "--up", "--format", "json")
    assert result.code == 0, result.stderr
    return result.stdout


def git_log(root: Path) -> str:
    repo = root / ".trainops" / "gitops.git"
    if not repo.exists():
        return ""
    proc = subprocess.run(["git", "--git-dir", str(repo), "log", "--format=%B"], capture_output=True, text=True)
    return proc.stdout


def test_submit_trains_tiny_llm_through_slurm(project: Path, slurm: SlurmCluster) -> None:
    data = submit(project)
    job = str(data["jobId"])
    run_id = str(data["runId"])
    assert job.isdigit()
    assert f"Trainops-Slurm-Job: {job}" in git_log(project)
    info = slurm.wait_job(job, DONE, timeout=180)
    log = run("train", "logs", run_id, "-f", str(project / "trainops.yaml"), "--env", "slurm-local")
    assert info["JobState"] == "COMPLETED", log.stdout[-3000:]
    assert steps(project)[-1] == 400
    status = run("train", "status", run_id, "-f", str(project / "trainops.yaml"), "-o", "json")
    assert status.code == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "COMPLETED"
    assert json.loads(status.stdout)["jobId"] == job
    assert "pushed step-000400" in log.stdout


def test_sbatch_refusal_commits_nothing(project: Path, slurm: SlurmCluster) -> None:
    overlay(project, "bad", {"queue": "no-such-partition"})
    result = run("train", "submit", "-f", str(project / "trainops.yaml"), "--env", "bad")
    assert result.code == 3, result.stderr
    assert "Invalid partition" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Trainops-Slurm-Job" not in git_log(project)
    assert not list((project / ".trainops").glob("runs/*/*/run.json"))


def test_unknown_run_is_not_found(project: Path, slurm: SlurmCluster) -> None:
    for command in ("status", "cancel", "logs"):  # the Slurm environment: no record of it there
        result = run("train", command, "run-nope", "-f", str(project / "trainops.yaml"), "--env", "slurm-local")
        assert result.code == 4, (command, result.stderr)
        assert "run-nope" in result.stderr


def test_submit_status_logs_over_ssh_on_a_login_host(
    project: Path, slurm: SlurmCluster, sshd: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINOPS_SSH_COMMAND", sshd.ssh_command)
    base = yaml.safe_load((project / "trainops.yaml").read_text())["environments"]["slurm-local"]["train"]
    login = {"loginHost": f"root@127.0.0.1:{sshd.port}", "submitDir": str(project)}
    overlay(project, "login", {"slurm": {**base["slurm"], **login}})
    data = submit(project, "login")
    job, run_id = str(data["jobId"]), str(data["runId"])
    record = json.loads((project / ".trainops" / "runs" / "tiny-llm" / run_id / "run.json").read_text())
    assert record["loginHost"] == f"root@127.0.0.1:{sshd.port}"
    info = slurm.wait_job(job, DONE, timeout=180)
    manifest = str(project / "trainops.yaml")
    log = run("train", "logs", run_id, "-f", manifest)
    assert info["JobState"] == "COMPLETED", log.stdout[-3000:]
    assert "pushed step-000400" in log.stdout
    status = run("train", "status", "-f", manifest, "-o", "json")  # every run submitted from here
    assert [(s["runId"], s["state"]) for s in json.loads(status.stdout)] == [(run_id, "COMPLETED")]
    # a login host that does not answer: a remote failure, on one line
    monkeypatch.setenv("TRAINOPS_SSH_COMMAND", f"{sshd.ssh_command} -o Port=1")
    down = run("train", "status", run_id, "-f", manifest)
    assert down.code == 6, down.stderr
    assert "ssh to root@127.0.0.1" in down.stderr


def test_a_failed_gitops_commit_cancels_the_held_job(project: Path, slurm: SlurmCluster) -> None:
    doc = yaml.safe_load((project / "trainops.yaml").read_text())
    env = dict(doc["environments"]["slurm-local"])
    env["gitops"] = {"repo": f"file://{project}/no-such-dir/gitops.git", "branch": "main", "path": "x"}
    doc["environments"]["nogit"] = env
    (project / "no-such-dir").write_text("a file where the repository's parent directory should be")
    (project / "trainops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    before = set(slurm.run("squeue", "-h", "-t", "all", "-o", "%i").stdout.split())
    result = run("train", "submit", "-f", str(project / "trainops.yaml"), "--env", "nogit")
    assert result.code != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    (new,) = set(slurm.run("squeue", "-h", "-t", "all", "-o", "%i").stdout.split()) - before
    info = slurm.job(new)
    assert (info["JobState"], info["RunTime"]) == ("CANCELLED", "00:00:00"), info  # held, never ran
    assert not list((project / ".trainops").glob("runs/*/*/run.json"))


def test_cancel_stops_the_job_and_its_last_checkpoint_is_pushed(project: Path, slurm: SlurmCluster) -> None:
    overlay(project, "long", {"env": {"TRAINOPS_CKPT_EVERY": "100", "TRAINOPS_MAX_STEPS": "1000000"}})
    data = submit(project, "long")
    job, run_id = str(data["jobId"]), str(data["runId"])
    manifest = str(project / "trainops.yaml")
    slurm.wait_job(job, ("RUNNING",), timeout=120)
    saved = lambda: "saved checkpoint" in run("train", "logs", run_id, "-f", manifest).stdout  # noqa: E731
    wait_for(saved, timeout=120, what="a checkpoint")
    text = run("train", "status", run_id, "-f", manifest)
    assert text.code == 0 and f"{run_id}  job {job}  RUNNING" in text.stdout, text.stdout
    cancelled = run("train", "cancel", run_id, "-f", manifest, "-o", "json")
    assert cancelled.code == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["jobId"] == job
    info = slurm.wait_job(job, DONE, timeout=120)
    assert info["JobState"] == "CANCELLED"
    wait_for(lambda: not slurm.job_processes(job), timeout=60, what="the job's steps gone", interval=0.3)
    log = run("train", "logs", run_id, "-f", manifest).stdout
    assert "stopping after the current step" in log and "stopped (SIGTERM from Slurm)" in log, log[-3000:]
    saves = [line for line in log.splitlines() if "saved checkpoint" in line]
    last_saved = max(int(line.rsplit("step-", 1)[1].split()[0]) for line in saves)
    assert steps(project)[-1] == last_saved, log[-3000:]  # what the trainer saved on SIGTERM is in the registry
