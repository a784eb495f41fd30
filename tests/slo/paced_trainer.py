"""A trainer at a set pace, for the training-metrics tests of `train run --local`.

    python paced_trainer.py STEPS EVERY FAST SLOW SLOW_FROM

It trains STEPS steps, FAST seconds each until step SLOW_FROM and SLOW seconds each after (the
work a step stands for is this wait), printing a metrics line per step (`{"step": N,
"train_loss": …, "tokens_per_second": …}`), and writes a checkpoint every EVERY steps in the
trainops layout under $TRAINOPS_CKPT_DIR.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TOKENS_PER_STEP = 4096


def main() -> None:
    steps, every = int(sys.argv[1]), int(sys.argv[2])
    fast, slow, slow_from = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    directory = Path(os.environ["TRAINOPS_CKPT_DIR"])
    for step in range(1, steps + 1):
        pace = fast if step < slow_from else slow
        time.sleep(pace)
        line = {"step": step, "train_loss": round(2.0 / step, 6), "tokens_per_second": TOKENS_PER_STEP / pace}
        print(json.dumps(line), flush=True)
        if step % every == 0:
            temp = directory / f".tmp-step-{step:06d}"
            temp.mkdir(parents=True, exist_ok=True)
            (temp / "state.json").write_text(json.dumps({"step": step}))
            temp.rename(directory / f"step-{step:06d}")


if __name__ == "__main__":
    main()
