"""A writer SIGKILLed in the middle of a checkpoint, with the watcher running: the partial
checkpoint never reaches the registry, not even on the watcher's final scan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.checkpoint.helpers import hf_ckpt, trainops_ckpt, wait_for, watcher
from trainops.checkpoint import WatchResult, list_checkpoints
from trainops.registry.context import Registries
from trainops.registry.reference import Reference

# Writes one file at a time, pausing longer than the watcher's settle time between files,
# and reports each file on stdout. trainer_state.json comes last, as the Trainer writes it.
HF_WRITER = textwrap.dedent(
    """
    import os, sys, time
    path = sys.argv[1]
    os.makedirs(path)
    for name in ["model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"]:
        with open(os.path.join(path, name), "wb") as fh:
            fh.write(os.urandom(4096) if name != "trainer_state.json" else b'{"global_step": 200}')
        print(name, flush=True)
        time.sleep(0.5)
    """
)

# tiny-llm's protocol: files go into .tmp-*, the rename publishes the checkpoint.
TRAINOPS_WRITER = textwrap.dedent(
    """
    import os, sys, time
    final = sys.argv[1]
    tmp = os.path.join(os.path.dirname(final), ".tmp-" + os.path.basename(final) + "-%d" % os.getpid())
    os.makedirs(tmp)
    for name in ["model.safetensors", "optimizer.safetensors", "trainer_state.json"]:
        with open(os.path.join(tmp, name), "wb") as fh:
            fh.write(os.urandom(4096))
        print(name, flush=True)
        time.sleep(0.5)
    os.rename(tmp, final)
    print("renamed", flush=True)
    """
)


def _watch_while(registries: Registries, directory: Path, repo: Reference, writer: str, target: Path) -> WatchResult:
    """Run the watcher; start the writer; SIGKILL it after its second file; stop the watcher."""
    w = watcher(registries, directory, repo, interval=0.05, settle=0.1)
    stop = threading.Event()
    results: list[WatchResult] = []
    thread = threading.Thread(target=lambda: results.append(w.run(stop)))
    thread.start()
    proc = subprocess.Popen([sys.executable, "-c", writer, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        written = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        assert all(written), "the writer stopped early"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    stop.set()
    thread.join(60)
    assert not thread.is_alive()
    return results[0]


@pytest.mark.parametrize("layout", ["huggingface", "auto"])
def test_hf_checkpoint_killed_mid_write_is_never_pushed(tmp_path: Path, layout: str) -> None:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("hf/ckpt")
    d = tmp_path / "out"
    hf_ckpt(d, 100)
    result = _watch_while(registries, d, repo, HF_WRITER, d / "checkpoint-200")
    assert (d / "checkpoint-200" / "optimizer.pt").is_file()  # the partial checkpoint is there…
    assert not (d / "checkpoint-200" / "trainer_state.json").exists()
    assert [p.step for p in result.pushed] == [100]  # …and never left the machine
    assert result.scans >= 3 and result.errors == []
    assert [i.tag for i in list_checkpoints(registries, repository=repo)] == ["step-100"]
    w = watcher(registries, d, repo, layout=layout)
    assert w.scan(final=True) == []  # a restarted watcher does not push it either


def test_trainops_checkpoint_killed_mid_write_is_never_pushed(tmp_path: Path) -> None:
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("tiny/ckpt")
    d = tmp_path / "out"
    trainops_ckpt(d, 100)
    result = _watch_while(registries, d, repo, TRAINOPS_WRITER, d / "step-000200")
    assert [p.name for p in d.iterdir() if p.name.startswith(".tmp-")]  # the leftover is there
    assert [p.step for p in result.pushed] == [100]
    assert [i.tag for i in list_checkpoints(registries, repository=repo)] == ["step-100"]


def test_file_changed_during_push_is_not_published(tmp_path: Path) -> None:
    """A file rewritten between the watcher's look and its push: nothing is published, and
    the checkpoint goes out whole on a later scan."""
    registries = Registries(default_registry=f"file://{tmp_path / 'registry'}")
    repo = registries.ref("tiny/ckpt")
    d = tmp_path / "out"
    path = trainops_ckpt(d, 1)
    events: list[str] = []
    grown = threading.Event()

    class Growing:
        """A progress sink that appends to the model while its first byte is being sent."""

        def add(self, name: str, total: int) -> Callable[[int], None]:
            def advance(_n: int) -> None:
                if name == "model.safetensors" and not grown.is_set():
                    grown.set()
                    with (path / "model.safetensors").open("ab") as fh:
                        fh.write(b"more")

            return advance

    w = watcher(registries, d, repo, on_event=lambda e: events.append(e.kind), progress=Growing())
    assert w.scan() == []
    assert grown.is_set() and events == ["skipped"]
    assert list_checkpoints(registries, repository=repo) == []
    [pushed] = wait_for(lambda: w.scan(), what="the whole checkpoint pushed")
    assert pushed.step == 1
