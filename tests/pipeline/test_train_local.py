"""`trainops train run --local` end to end: tiny-llm trains for real, checkpoints reach the
registry with lineage, and a run killed with SIGKILL resumes — from its own directory, and
from the registry when the directory is gone (a replaced node).

Everything is checked from the outside: the registry through the Store API (tags, lineage
annotations), the checkpoint files through safetensors, never through the watcher's state.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from safetensors.numpy import load_file

from trainops.errors import NotFoundError
from trainops.registry.context import Registries
from trainops.registry.lineage_data import Lineage
from trainops.registry.listing import list_repository
from trainops.registry.store import resolve

REPO = Path(__file__).resolve().parents[2]
TRAINOPS = [sys.executable, "-m", "trainops.cli.main"]
CKPT_EVERY = 300
DEADLINE = 90.0


@dataclass
class Project:
    root: Path
    registry_url: str
    insecure: tuple[str, ...]

    @property
    def manifest(self) -> Path:
        return self.root / "trainops.yaml"

    @property
    def ckpt_dir(self) -> Path:
        return self.root / ".trainops" / "runs" / "tiny-llm" / "checkpoints"

    def write(self, *, max_steps: int, resume: str = "latest", keep_last: int = 10) -> None:
        doc: dict[str, Any] = {
            "apiVersion": "trainops.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "tiny-llm"},
            "spec": {
                "registry": self.registry_url,
                "insecureRegistries": list(self.insecure),
                "image": {"template": "train-pytorch"},
                "train": {
                    "scheduler": "local",
                    "gpusPerNode": 0,
                    "command": [sys.executable, "-m", "tiny_llm.train"],
                    "env": {"TRAINOPS_MAX_STEPS": str(max_steps), "TRAINOPS_CKPT_EVERY": str(CKPT_EVERY)},
                    "checkpoint": {
                        "layout": "trainops",
                        "keep": {"last": keep_last, "best": 1, "metric": "val_loss", "mode": "min"},
                        "resume": resume,
                    },
                },
            },
        }
        self.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    def registries(self) -> Registries:
        return Registries(default_registry=self.registry_url, base_dir=self.root, insecure_registries=self.insecure)

    def argv(self, *extra: str) -> list[str]:
        return [*TRAINOPS, "train", "run", "--local", "-f", str(self.manifest), "--interval", "0.2", *extra]

    def start(self, *extra: str) -> subprocess.Popen[str]:
        log = (self.root / "run.log").open("w")  # a file, not a pipe: a long run never blocks on it
        return subprocess.Popen(
            self.argv(*extra),
            cwd=self.root,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: the kill takes trainops and the trainer
        )

    def run(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*extra), cwd=self.root, env=_env(), capture_output=True, text=True, timeout=DEADLINE, check=False
        )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "TINY_LLM_"))}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture(params=["file", "oci"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    """A project on a file:// registry, then on a real Distribution registry."""
    if request.param == "file":
        made = Project(tmp_path / "proj", "file://.trainops/registry", ())
    else:
        registry = request.getfixturevalue("registry")
        made = Project(tmp_path / "proj", f"oci://{registry.host}/local{uuid.uuid4().hex[:8]}", (registry.host,))
    made.root.mkdir(parents=True)
    yield made


def checkpoints(project: Project) -> dict[int, tuple[str, Lineage]]:
    """step → (digest, lineage) of every checkpoint tag in the registry."""
    with project.registries() as regs:
        repo = regs.ref("tiny-llm/checkpoints")
        try:
            listing = list_repository(regs, ref=repo)
        except NotFoundError:  # no repository yet
            return {}
        out = {}
        for tag in listing.tags:
            parsed = resolve(regs, ref=repo.with_tag(tag.tag)).parsed
            line = parsed.lineage()
            assert line.step is not None, tag.tag
            out[line.step] = (parsed.digest, line)
        return out


def wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            log = Path(str(proc.args[proc.args.index("-f") + 1])).parent / "run.log"
            raise AssertionError(f"trainops exited {proc.returncode} before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def kill_group(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def model_tensors(path: Path) -> dict[str, np.ndarray]:
    return load_file(str(path / "model.safetensors"))


def test_run_pushes_every_checkpoint_with_a_lineage_chain(project: Project) -> None:
    project.write(max_steps=3 * CKPT_EVERY)
    done = project.run("--run-id", "first", "-o", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # the trainer's own stdout went to stderr
    found = checkpoints(project)
    assert sorted(found) == [CKPT_EVERY, 2 * CKPT_EVERY, 3 * CKPT_EVERY]
    assert {(p["step"], p["digest"]) for p in result["pushed"]} == {(s, d) for s, (d, _) in found.items()}
    assert result["exitCode"] == 0 and result["runId"] == "first" and '"final":true' in done.stderr
    for step, (_, line) in found.items():
        assert line.run_id == "first" and line.pipeline == "tiny-llm"
        assert "val_loss" in line.metrics
        if step == CKPT_EVERY:
            assert line.parents == ()  # trained from scratch
        else:
            parent = line.parents[0]
            assert parent.relation == "parent" and parent.digest == found[step - CKPT_EVERY][0]
    # the pushed files are the ones on disk
    with project.registries() as regs:
        parsed = resolve(regs, ref=regs.ref(f"tiny-llm/checkpoints:step-{3 * CKPT_EVERY}")).parsed
    assert {layer.annotations.get("org.cncf.model.filepath") for layer in parsed.layers} >= {
        "model.safetensors",
        "trainer_state.json",
    }


def test_sigkill_then_restart_resumes_from_the_newest_checkpoint(project: Project, tmp_path: Path) -> None:
    total = 8 * CKPT_EVERY
    # the reference: the same training, never interrupted
    ref_project = Project(tmp_path / "reference", "file://.trainops/registry", ())
    ref_project.root.mkdir()
    ref_project.write(max_steps=total)
    straight = ref_project.run("--run-id", "straight")
    assert straight.returncode == 0, straight.stderr[-3000:]

    project.write(max_steps=100 * total)  # would run for minutes: the kill comes first
    proc = project.start("--run-id", "killed")
    wait_for(lambda: len(checkpoints(project)) >= 2, "two checkpoints in the registry", proc)
    kill_group(proc)
    before = checkpoints(project)
    local = sorted(p.name for p in project.ckpt_dir.iterdir() if p.name.startswith("step-"))
    newest_local = int(local[-1].split("-")[1])
    assert newest_local < total, "the kill came too late to prove anything; lower the speed"

    project.write(max_steps=total)
    resumed = project.run("--run-id", "resumed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = checkpoints(project)
    # what the killed run had written completely is in the registry now, and the new run's
    # first checkpoint names it as the checkpoint it resumed from
    assert newest_local in after
    if newest_local in before:
        assert after[newest_local][0] == before[newest_local][0]
    first_new = min(step for step, (_, line) in after.items() if line.run_id == "resumed")
    assert first_new == newest_local + CKPT_EVERY
    parents = after[first_new][1].parents
    assert [(p.relation, p.digest) for p in parents] == [("resumed-from", after[newest_local][0])]
    assert "resumed from" in resumed.stderr
    # exact resume: the same weights as the run that was never killed
    final = model_tensors(project.ckpt_dir / f"step-{total:06d}")
    expected = model_tensors(ref_project.ckpt_dir / f"step-{total:06d}")
    assert final.keys() == expected.keys()
    for name in final:
        np.testing.assert_array_equal(final[name], expected[name], err_msg=name)


def test_replaced_node_pulls_the_newest_checkpoint_from_the_registry(project: Project) -> None:
    total = 6 * CKPT_EVERY
    project.write(max_steps=100 * total)
    proc = project.start("--run-id", "lost-node")
    wait_for(lambda: len(checkpoints(project)) >= 2, "two checkpoints in the registry", proc)
    kill_group(proc)
    pushed = checkpoints(project)
    newest_pushed = max(pushed)
    shutil.rmtree(project.root / ".trainops" / "runs")  # the node and its disk are gone

    project.write(max_steps=total)
    resumed = project.run("--run-id", "new-node")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step-{newest_pushed}" in resumed.stderr  # "restored …:step-N"
    restored_dir = project.ckpt_dir / f"step-{newest_pushed:06d}"
    assert restored_dir.is_dir()
    after = checkpoints(project)
    first_new = min(step for step, (_, line) in after.items() if line.run_id == "new-node")
    assert first_new == newest_pushed + CKPT_EVERY
    assert [(p.relation, p.digest) for p in after[first_new][1].parents] == [("resumed-from", pushed[newest_pushed][0])]
    assert max(after) == total


SLOW_WRITER = """
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["TRAINOPS_CKPT_DIR"])
step = 0
while True:
    step += 10
    ckpt = root / f"checkpoint-{step}"
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "model.safetensors").write_bytes(os.urandom(4096))
    if step == 30:  # the third checkpoint is being written when the kill comes
        (root / "WRITING").write_text(str(step))
        time.sleep(600)
    (ckpt / "optimizer.pt").write_bytes(os.urandom(4096))
    state = {"global_step": step, "log_history": [{"step": step, "eval_loss": 1.0 / step}]}
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    time.sleep(0.3)
"""


def test_a_checkpoint_being_written_at_the_kill_is_never_pushed(project: Project) -> None:
    project.write(max_steps=1)
    doc = yaml.safe_load(project.manifest.read_text())
    writer = project.root / "writer.py"
    writer.write_text(SLOW_WRITER, encoding="utf-8")
    doc["spec"]["train"]["command"] = [sys.executable, str(writer)]
    doc["spec"]["train"]["checkpoint"]["layout"] = "huggingface"
    project.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    proc = project.start("--run-id", "half")
    wait_for(lambda: (project.ckpt_dir / "WRITING").exists(), "the third checkpoint to be mid-write", proc)
    wait_for(lambda: 10 in checkpoints(project), "checkpoint-10 in the registry", proc)
    kill_group(proc)
    assert 30 not in checkpoints(project)

    # a restart on the same directory pushes what was complete and never the partial one
    doc["spec"]["train"]["command"] = [sys.executable, "-c", "pass"]
    project.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    again = project.run("--run-id", "after")
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(checkpoints(project)) == [10, 20]


def test_resume_none_refuses_a_repository_holding_another_runs_checkpoints(project: Project) -> None:
    project.write(max_steps=CKPT_EVERY)
    assert project.run("--run-id", "earlier").returncode == 0
    before = checkpoints(project)
    shutil.rmtree(project.ckpt_dir)
    project.write(max_steps=2 * CKPT_EVERY, resume="none")
    fresh = project.run("--run-id", "fresh")
    assert fresh.returncode == 5, fresh.stderr[-2000:]
    last = fresh.stderr.strip().splitlines()[-1]
    assert "holds checkpoints of run earlier" in last and "checkpoint.repository" in last
    assert not project.ckpt_dir.exists() or not any(project.ckpt_dir.iterdir())  # the trainer never ran
    assert checkpoints(project) == before


GATED_WRITER = """
import json, os, time
from pathlib import Path
root = Path(os.environ["TRAINOPS_CKPT_DIR"])
(root.parent / "READY").write_text("")
while not (root.parent / "GO").exists():
    time.sleep(0.02)
ckpt = root / "checkpoint-10"
ckpt.mkdir()
(ckpt / "model.safetensors").write_bytes(os.urandom(1024))
(ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
"""


def test_a_failed_last_push_makes_the_run_fail_and_says_how_to_finish(tmp_path: Path, registry: Any) -> None:
    from tests.registry.proxy import FaultProxy

    with FaultProxy(registry.host) as proxy:
        project = Project(tmp_path / "gated", f"oci://{proxy.host}/gated{uuid.uuid4().hex[:6]}", (proxy.host,))
        project.root.mkdir()
        project.write(max_steps=1)
        doc = yaml.safe_load(project.manifest.read_text())
        (project.root / "writer.py").write_text(GATED_WRITER, encoding="utf-8")
        doc["spec"]["train"]["command"] = [sys.executable, str(project.root / "writer.py")]
        doc["spec"]["train"]["checkpoint"]["layout"] = "huggingface"
        project.manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        proc = project.start("--run-id", "gated")
        ready = project.ckpt_dir.parent / "READY"
        wait_for(ready.exists, "the trainer to start", proc)
        proxy.fail_next = 10**6  # the registry is gone from here on
        (project.ckpt_dir.parent / "GO").write_text("")
        proc.wait(timeout=DEADLINE)
        log = (project.root / "run.log").read_text()
        assert proc.returncode == 6, log[-3000:]
        last = log.strip().splitlines()[-1]
        assert "last checkpoints could not be pushed" in last and "ckpt watch" in last and "--once" in last
        proxy.fail_next = 0
    assert (project.ckpt_dir / "checkpoint-10" / "trainer_state.json").is_file()  # still there to push


def test_sigterm_is_passed_on_and_the_checkpoint_it_triggers_is_pushed(project: Project) -> None:
    """Preemption: SIGTERM to trainops reaches the trainer, which saves where it is; the last
    scan pushes that checkpoint before trainops exits 9 (a command it ran failed), naming the
    trainer's status."""
    project.write(max_steps=100 * CKPT_EVERY)
    proc = project.start("--run-id", "preempted")
    wait_for(lambda: len(checkpoints(project)) >= 1, "a first checkpoint in the registry", proc)
    proc.send_signal(signal.SIGTERM)  # trainops only, as the kubelet signals a container's main process
    assert proc.wait(timeout=DEADLINE) == 9
    last = (project.root / "run.log").read_text().strip().splitlines()[-1]
    assert last.startswith("Error: train.command ") and ("SIGTERM" in last or "exited 143" in last), last
    found = checkpoints(project)
    local = sorted(int(p.name.split("-")[1]) for p in project.ckpt_dir.iterdir() if p.name.startswith("step-"))
    assert max(found) == local[-1]  # the checkpoint saved on the signal (usually off the 300-step grid) is pushed
    assert found[local[-1]][1].run_id == "preempted"
