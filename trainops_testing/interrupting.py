"""Run trainops as a real process that interrupts itself: SIGINT (Ctrl-C) from inside once
TRAINOPS_TEST_INTERRUPT_AFTER bytes have been transferred (a hook on the CLI's progress
callback, whatever backend or server is on the other side), and with
TRAINOPS_TEST_WRITTEN=PATH the bytes the process wrote (/proc/self/io wchar) written to
PATH at exit. Used by tests/registry/test_resume.py and bench/registry.py.

    subprocess.run(command("push", SRC, REF), env={..., "TRAINOPS_TEST_INTERRUPT_AFTER": "…"})
"""

from __future__ import annotations

import sys

HOOK = """
import atexit, os, runpy, signal, sys
from trainops.cli import progress
limit, done = int(os.environ.get("TRAINOPS_TEST_INTERRUPT_AFTER") or 0), [0]
# Ctrl-C as a terminal delivers it: a process started in the background by a shell without job
# control (CI's `cmd &`, nohup) inherits SIGINT ignored, and Python then raises nothing on it
signal.signal(signal.SIGINT, signal.default_int_handler)
report = os.environ.get("TRAINOPS_TEST_WRITTEN")
def add(self, name, total):
    def advance(n):
        done[0] += n
        if limit and done[0] >= limit > done[0] - n:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, from a worker thread: the main one gets it
    return advance
progress._Null.add = add
def written():
    with open("/proc/self/io") as fh, open(report, "w") as out:
        out.write(next(line.split()[1] for line in fh if line.startswith("wchar:")))
if report:
    atexit.register(written)
sys.argv = ["trainops", *sys.argv[1:]]
runpy.run_module("trainops.cli.main", run_name="__main__")
"""


def command(*args: str) -> list[str]:
    """`trainops ARGS` in a process that runs HOOK first."""
    return [sys.executable, "-c", HOOK, *args]
