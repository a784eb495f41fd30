"""A stand-in eval command for the tests: `python evalcmd.py MODE`.

It records the contract it received (TRAINOPS_EVAL_* and TRAINOPS_CHECKPOINT_REF, the
checkpoint's files, EXTRA from eval.env) in seen.json beside it, then behaves as MODE says.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
mode = sys.argv[1]
checkpoint = Path(os.environ["TRAINOPS_EVAL_CHECKPOINT"])
output = Path(os.environ["TRAINOPS_EVAL_OUTPUT"])
seen = {
    "checkpoint_files": sorted(p.name for p in checkpoint.iterdir()),
    "ref": os.environ["TRAINOPS_CHECKPOINT_REF"],
    "output_exists_before": output.exists(),
    "extra": os.environ.get("EXTRA"),
    "checkpoint_dir": str(checkpoint),
}
(here / "seen.json").write_text(json.dumps(seen))
if mode == "ok":
    output.write_text(json.dumps({"score": 0.9, "loss": 1.5, "step": 3}))
elif mode == "crash":
    sys.exit(3)
elif mode == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (here / "child.pid").write_text(str(child.pid))
    time.sleep(600)
elif mode == "notjson":
    output.write_text("score: 0.9\n")
elif mode == "string":
    output.write_text(json.dumps({"score": 0.9, "verdict": "good"}))
elif mode == "bool":
    output.write_text(json.dumps({"score": True}))
elif mode == "array":
    output.write_text(json.dumps([0.9]))
elif mode == "nan":
    output.write_text('{"score": NaN}')
elif mode == "silent":
    pass
else:
    sys.exit(f"unknown mode {mode}")
