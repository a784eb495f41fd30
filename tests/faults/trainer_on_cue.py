"""A trainer that fails on cue, for the tests of `train run --local`'s supervision.

    python trainer_on_cue.py CUE STEPS EVERY

It trains STEPS steps (a metrics line each: `{"step": N, "train_loss": …}`), writes a
checkpoint every EVERY steps in the trainops layout (`step-NNNNNN/`, written in a `.tmp-`
sibling and renamed) under $TRAINOPS_CKPT_DIR, and resumes from the newest one there. The
file CUE, when it exists, holds `KIND STEP`: the start that reaches STEP removes CUE (so the
restarted trainer goes on) and then fails so:

- crash: a segmentation fault (SIGSEGV sent to itself);
- hang: it stops, writing and checkpointing nothing, until it is killed;
- oom: PyTorch's CUDA out-of-memory line on stderr, exit 1;
- raise: a bug in the training code, an uncaught ValueError (its traceback on stderr, exit 1).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path


def _checkpoint(directory: Path, step: int) -> None:
    temp = directory / f".tmp-step-{step:06d}"
    temp.mkdir(parents=True, exist_ok=True)
    (temp / "state.json").write_text(json.dumps({"step": step}))
    temp.rename(directory / f"step-{step:06d}")


def _fail(kind: str) -> None:
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        threading.Event().wait()
    if kind == "oom":
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", file=sys.stderr, flush=True)
        sys.exit(1)
    if kind == "raise":
        raise ValueError("shapes (4, 8) and (16,) not aligned")


def main() -> None:
    cue, total, every = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    directory = Path(os.environ["TRAINOPS_CKPT_DIR"])
    done = [int(p.name[5:]) for p in directory.glob("step-*")]
    start = max(done, default=0)
    kind, at = cue.read_text().split() if cue.exists() else ("", "0")
    for step in range(start + 1, total + 1):
        if kind and step == int(at):
            cue.unlink()
            _fail(kind)
        print(json.dumps({"step": step, "train_loss": round(1.0 / step, 6)}), flush=True)
        if step % every == 0:
            _checkpoint(directory, step)


if __name__ == "__main__":
    main()
